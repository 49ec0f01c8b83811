// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * Playwright configuration of the real-browser test through JupyterHub
 * (service mode). scripts/test-browser-hub.sh starts the Hub, the service,
 * the users' servers and the tool containers, then runs this with
 * E2E_HUB_URL and friends in the environment.
 */
import { defineConfig } from "@playwright/test";

import base from "./playwright.config";

export default defineConfig({
  ...base,
  testDir: "./hub",
});
