// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * The README's pictures, from the demo's own tool types (run by
 * scripts/screenshots.sh, which sets SHOTS_URL, SHOTS_TOKEN and SHOTS_DIR).
 */
import * as path from 'path';

import { expect, test } from '@playwright/test';

function env(name: string): string {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set: run scripts/screenshots.sh`);
  }
  return value;
}

test('the launcher and a terminal of the demo', async ({ page }) => {
  const dir = env('SHOTS_DIR');
  await page.goto(
    `${env('SHOTS_URL')}lab/workspaces/screenshots?reset&token=${env('SHOTS_TOKEN')}`
  );
  const section = page.locator('.jp-Launcher-section', {
    has: page.locator('.jp-Launcher-sectionTitle', {
      hasText: 'Tool Terminals'
    })
  });
  const course = section.locator('.jp-LauncherCard', { hasText: 'Course' });
  await expect(course).toBeVisible({ timeout: 60_000 });
  await section.scrollIntoViewIfNeeded();
  await page.screenshot({ path: path.join(dir, 'launcher.png') });

  await course.click();
  const terminal = page.locator('.jp-ToolTerminal:visible');
  await expect(terminal.locator('.xterm-accessibility-tree')).toContainText(
    'Welcome to the course sandbox'
  );
  await terminal.locator('.xterm-helper-textarea').focus();
  await page.keyboard.type('echo "course=$COURSE in $PWD"; ls /');
  await page.keyboard.press('Enter');
  await expect(terminal.locator('.xterm-accessibility-tree')).toContainText(
    'course=demo in /data'
  );
  await page.screenshot({ path: path.join(dir, 'terminal.png') });
});
