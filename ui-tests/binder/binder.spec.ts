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
  instanceTiles,
  openLab,
  openToolTerminal,
  typeLine,
  waitForLine
} from '../tests/helpers';

test('Binder demo: launcher tiles and a local terminal', async ({ page }) => {
  // One tile per local instance of binder/'s configuration.
  await openLab(page);
  await expect(instanceTiles(page)).toHaveCount(3, { timeout: 60_000 });
  const terminal = await openToolTerminal(page);
  await typeLine(page, terminal, 'echo "demo=$TOOL_TERMINAL_DEMO"');
  await waitForLine(terminal, /^demo=welcome$/);
});
