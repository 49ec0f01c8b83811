// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * Real-browser test against a JupyterLab whose server cannot reach a
 * container engine (started by scripts/test-browser.sh with DOCKER_HOST on a
 * socket nobody serves): the launcher and the picker say so, with the
 * server's own message.
 */
import { expect, test } from '@playwright/test';

import { env, instanceTiles, TOKEN } from './helpers';

const URL = env('E2E_NO_ENGINE_URL');

test('without an engine, the launcher and the picker say why', async ({
  page
}) => {
  const answer = await page.request.get(`${URL}tool-terminal/api/instances`, {
    headers: { Authorization: `token ${TOKEN}` }
  });
  expect(answer.status()).toBe(503);
  const message: string = (await answer.json()).message;
  expect(message.length).toBeGreaterThan(0);

  await page.goto(`${URL}lab/workspaces/no-engine?reset&token=${TOKEN}`);
  const tile = instanceTiles(page);
  await expect(tile).toHaveCount(1, { timeout: 60_000 });
  await expect(tile).toContainText('Tool instances unavailable');
  await expect(tile).toHaveAttribute('title', new RegExp(escape(message)));
  await tile.click();
  const dialog = page.locator('.jp-Dialog');
  await expect(dialog).toContainText(message);
  await dialog.getByRole('button', { name: 'OK' }).click();
  await expect(dialog).toHaveCount(0);

  // The "Open Tool Terminal" picker, from the command palette.
  await page.keyboard.press('Control+Shift+C');
  await page.keyboard.type('Open Tool Terminal');
  await page.keyboard.press('Enter');
  await expect(dialog).toContainText(message);
  await expect(dialog).not.toContainText('no running tool instance');
  await dialog.getByRole('button', { name: 'OK' }).click();
  await expect(page.locator('.jp-ToolTerminal-tab')).toHaveCount(0);
});

/**
 * A string as a literal regular expression.
 */
function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
