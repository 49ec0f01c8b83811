// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * Playwright configuration of the Binder smoke test (scripts/test-binder.sh):
 * the main configuration, with the Binder spec only.
 */
import { defineConfig } from '@playwright/test';

import base from './playwright.config';

export default defineConfig({ ...base, testDir: './binder' });
