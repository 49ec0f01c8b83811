// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * The Binder demo in a real browser: JupyterLab started with exactly
 * binder/'s configuration (local tool instances, no Docker) by
 * scripts/test-binder.sh. A tile per instance, a terminal with the startup
 * banner and the tool type's variable.
 */
import { expect, test } from '@playwright/test';

import {
  launcherSection,
  openToolTerminal,
  typeLine,
  waitForLine
} from '../tests/helpers';

test('Binder demo: launcher tiles and a local terminal', async ({ page }) => {
  const terminal = await openToolTerminal(page);
  await expect(launcherSection(page).locator('.jp-LauncherCard')).toHaveCount(
    3
  );
  await typeLine(page, terminal, 'echo "demo=$TOOL_TERMINAL_DEMO"');
  await waitForLine(terminal, /^demo=welcome$/);
});
