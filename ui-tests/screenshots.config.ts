// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * Playwright configuration of scripts/screenshots.sh: the README's pictures,
 * taken from the demo on purpose (not a test).
 */
import { defineConfig } from '@playwright/test';

import base from './playwright.config';

export default defineConfig({
  ...base,
  testDir: './screenshots'
});
