// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * Playwright configuration of the real-browser end-to-end test.
 *
 * scripts/test-browser.sh starts JupyterLab (with the extension, under a
 * JupyterHub-like prefix) and the labelled tool containers, then runs this
 * with E2E_BASE_URL and friends in the environment. The browser is Debian's
 * chromium: Playwright's own browser downloads do not work here.
 */
import { defineConfig } from '@playwright/test';

export default defineConfig({
  testDir: './tests',
  timeout: 180_000,
  expect: { timeout: 20_000 },
  fullyParallel: false,
  workers: 1,
  retries: 0,
  reporter: [['list']],
  // Traces and failure screenshots, outside the checkout when the script says so.
  outputDir: process.env.E2E_OUTPUT_DIR ?? './test-results',
  use: {
    headless: true,
    viewport: { width: 1280, height: 800 },
    actionTimeout: 20_000,
    navigationTimeout: 60_000,
    trace: 'retain-on-failure',
    screenshot: 'only-on-failure',
    launchOptions: {
      executablePath: process.env.E2E_CHROMIUM ?? '/usr/bin/chromium',
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-dev-shm-usage',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--disable-default-apps',
        '--disable-extensions',
        '--no-first-run',
        '--no-default-browser-check'
      ]
    }
  }
});
