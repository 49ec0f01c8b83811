// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * Playwright configuration of the real-browser test of Jupyter AI's chat
 * (its agents in tool terminals). scripts/test-acp-browser.sh starts
 * JupyterLab with Jupyter AI, the scripted persona and the tool containers,
 * then runs this with E2E_BASE_URL and friends in the environment.
 */
import { defineConfig } from "@playwright/test";

import base from "./playwright.config";

export default defineConfig({
  ...base,
  testDir: "./acp",
});
