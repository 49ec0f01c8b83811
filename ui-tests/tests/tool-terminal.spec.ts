// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * Real-browser end-to-end test: JupyterLab with jupyter-tool-terminal,
 * served under a JupyterHub-like prefix, against the real Docker Engine and
 * a labelled tool container (started by scripts/test-browser.sh).
 */
import { execFileSync } from 'child_process';
import * as path from 'path';

import type { Locator, Page } from '@playwright/test';
import { expect, test } from '@playwright/test';

function env(name: string): string {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set: run scripts/test-browser.sh`);
  }
  return value;
}

const BASE_URL = env('E2E_BASE_URL');
const TOKEN = env('E2E_TOKEN');
const CONTAINER = env('E2E_CONTAINER');
const OTHER_CONTAINER = env('E2E_OTHER_CONTAINER');
const DISPLAY_NAME = env('E2E_DISPLAY_NAME');
const BANNER = env('E2E_BANNER');
const DOCS_DIR = env('E2E_DOCS_DIR');

const TILE_LABEL = `${DISPLAY_NAME} (${CONTAINER})`;

/**
 * The shells (and their children started by the startup command) running in
 * the container, from `docker top`.
 */
function shells(): string[] {
  const out = execFileSync('docker', ['top', CONTAINER, '-o', 'pid,args'], {
    encoding: 'utf-8'
  });
  return out
    .split('\n')
    .slice(1)
    .map(line => line.trim())
    .filter(line => /\b(\/bin\/)?sh\b/.test(line));
}

/**
 * The visible terminal panel (the active tool terminal).
 */
function activeTerminal(page: Page): Locator {
  return page.locator('.jp-ToolTerminal:visible');
}

/**
 * The rows of a terminal's screen, as text (xterm's accessibility tree,
 * present because the user's terminal settings enable the screen reader
 * mode, which the tool terminal follows like JupyterLab's own terminal).
 */
async function screenLines(terminal: Locator): Promise<string[]> {
  const rows = await terminal
    .locator('.xterm-accessibility-tree > div')
    .allTextContents();
  return rows.map(row => row.replace(/\u00a0/g, ' ').trimEnd());
}

/**
 * Type a command line in a terminal.
 */
async function typeLine(
  page: Page,
  terminal: Locator,
  line: string
): Promise<void> {
  await terminal.locator('.xterm-helper-textarea').focus();
  await page.keyboard.type(line);
  await page.keyboard.press('Enter');
}

/**
 * Wait for a screen line matching a pattern and return its match.
 */
async function waitForLine(
  terminal: Locator,
  pattern: RegExp,
  accept: (match: RegExpMatchArray) => boolean = () => true
): Promise<RegExpMatchArray> {
  let found: RegExpMatchArray | null = null;
  await expect
    .poll(
      async () => {
        const lines = await screenLines(terminal);
        for (let i = lines.length - 1; i >= 0; i--) {
          const match = lines[i].match(pattern);
          if (match && accept(match)) {
            found = match;
            return true;
          }
        }
        return false;
      },
      { message: `a terminal line matching ${pattern}` }
    )
    .toBe(true);
  return found!;
}

/**
 * Run a command of a tool terminal tab's context menu.
 */
async function tabMenu(page: Page, label: string): Promise<void> {
  await page
    .locator('.lm-DockPanel-tabBar .jp-ToolTerminal-tab.lm-mod-current')
    .click({ button: 'right' });
  await page
    .locator('.lm-Menu .lm-Menu-itemLabel', { hasText: label })
    .click();
}

test('launcher tile, terminal, resize, exit, reset and close', async ({
  page
}) => {
  // JupyterLab under the prefix, logged in with the token (cookie auth for
  // REST and WebSocket afterwards).
  await page.goto(`${BASE_URL}lab?token=${TOKEN}`);

  // Launcher: one tile for the user's instance, in "Tool Terminals"; none
  // for the instance of another owner.
  const section = page.locator('.jp-Launcher-section', {
    has: page.locator('.jp-Launcher-sectionTitle', {
      hasText: 'Tool Terminals'
    })
  });
  const tile = section.locator('.jp-LauncherCard', { hasText: TILE_LABEL });
  await expect(tile).toBeVisible({ timeout: 60_000 });
  await expect(section.locator('.jp-LauncherCard')).toHaveCount(1);
  await expect(page.getByText(OTHER_CONTAINER)).toHaveCount(0);
  // The tool type's own SVG icon is on the tile.
  await expect(tile.locator('svg [data-e2e-icon]')).toHaveCount(1);
  await section.scrollIntoViewIfNeeded();
  await page.screenshot({ path: path.join(DOCS_DIR, 'launcher.png') });

  // Open a terminal from the tile: the tab names the instance, the startup
  // command's banner comes first.
  await tile.click();
  const tab = page.locator('.lm-DockPanel-tabBar .jp-ToolTerminal-tab', {
    hasText: CONTAINER
  });
  await expect(tab).toHaveCount(1);
  const terminal = activeTerminal(page);
  await expect(terminal.locator('.xterm-accessibility-tree')).toContainText(
    BANNER
  );
  expect(shells().length).toBeGreaterThan(0);

  await typeLine(page, terminal, 'echo $((6*7))');
  await waitForLine(terminal, /^42$/);

  // The PTY has the panel's size, and follows the browser window.
  await typeLine(page, terminal, 'echo SIZE=$(stty size)');
  const before = await waitForLine(terminal, /^SIZE=(\d+) (\d+)$/);
  const rowsBefore = (await screenLines(terminal)).length;
  expect(Number(before[1])).toBe(rowsBefore);
  await page.screenshot({ path: path.join(DOCS_DIR, 'terminal.png') });

  await page.setViewportSize({ width: 960, height: 560 });
  await expect
    .poll(async () => (await screenLines(terminal)).length)
    .toBeLessThan(rowsBefore);
  const rowsAfter = (await screenLines(terminal)).length;
  await expect(async () => {
    await typeLine(page, terminal, 'clear; echo SIZE=$(stty size)');
    const after = await waitForLine(terminal, /^SIZE=(\d+) (\d+)$/);
    expect(after[0]).not.toBe(before[0]);
    expect(Number(after[1])).toBe(rowsAfter);
    expect(Number(after[2])).toBeLessThan(Number(before[2]));
  }).toPass({ timeout: 30_000 });

  // The shell ends: the panel shows the exit code and offers a new session.
  await typeLine(page, terminal, 'clear; exit 3');
  const status = page.locator('.jp-ToolTerminal-status:visible');
  await expect(status).toContainText('exited with code 3');
  await expect.poll(() => shells().length).toBe(0);
  await status.getByRole('button', { name: 'Start a new session' }).click();
  await expect(status).toHaveCount(0);
  await expect(terminal.locator('.xterm-accessibility-tree')).toContainText(
    BANNER
  );
  await typeLine(page, terminal, 'echo $((6*7))');
  await waitForLine(terminal, /^42$/);

  // Reset from the tab's context menu: a new shell (new PID) in the same
  // panel, after the startup command's banner again.
  await typeLine(page, terminal, 'clear; echo PID=$$');
  const pid = await waitForLine(terminal, /^PID=(\d+)$/);
  await expect(terminal.locator('.xterm-accessibility-tree')).not.toContainText(
    BANNER
  );
  await tabMenu(page, 'Reset Tool Terminal Session');
  await expect(terminal.locator('.xterm-accessibility-tree')).toContainText(
    BANNER
  );
  await expect(async () => {
    await typeLine(page, terminal, 'echo PID=$$');
    await waitForLine(terminal, /^PID=(\d+)$/, m => m[1] !== pid[1]);
  }).toPass({ timeout: 30_000 });

  // A second panel on the same instance is an independent session.
  const shellsOfOne = shells().length;
  await page.locator('.lm-DockPanel-tabBar .lm-TabBar-addButton').click();
  await tile.click();
  await expect(tab).toHaveCount(2);
  const second = activeTerminal(page);
  await expect(second.locator('.xterm-accessibility-tree')).toContainText(
    BANNER
  );
  await expect.poll(() => shells().length).toBe(2 * shellsOfOne);
  await typeLine(page, second, 'echo PID=$$');
  await waitForLine(second, /^PID=(\d+)$/, m => m[1] !== pid[1]);
  await tabMenu(page, 'Close Tool Terminal Session');
  await expect(tab).toHaveCount(1);
  await expect.poll(() => shells().length).toBe(shellsOfOne);
  await tab.click();

  // Close the session from the tab's context menu: the panel closes and the
  // shell is gone from the container.
  expect(shells().length).toBeGreaterThan(0);
  await tabMenu(page, 'Close Tool Terminal Session');
  await expect(tab).toHaveCount(0);
  await expect.poll(() => shells(), { timeout: 30_000 }).toEqual([]);
});
