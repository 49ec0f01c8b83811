// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * Helpers shared by the real-browser end-to-end specs: the environment that
 * scripts/test-browser.sh sets, the tool container (through the docker CLI),
 * and the terminal as the user sees it (through xterm's accessibility tree).
 */
import { execFileSync } from 'child_process';

import type { Locator, Page } from '@playwright/test';
import { expect } from '@playwright/test';

/**
 * A variable of the environment scripts/test-browser.sh sets.
 */
export function env(name: string): string {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set: run scripts/test-browser.sh`);
  }
  return value;
}

export const BASE_URL = env('E2E_BASE_URL');
export const TOKEN = env('E2E_TOKEN');
export const CONTAINER = env('E2E_CONTAINER');
export const DISPLAY_NAME = env('E2E_DISPLAY_NAME');
export const BANNER = env('E2E_BANNER');

/**
 * The label of the launcher tile (and tab) of the user's tool instance.
 */
export const TILE_LABEL = `${DISPLAY_NAME} (${CONTAINER})`;

/**
 * Run a command in the tool container with `docker exec` (as the image's
 * user, outside any terminal session) and return its standard output.
 *
 * @param argv - The command and its arguments.
 * @param input - Bytes for the command's standard input, if any.
 */
export function dockerExec(argv: string[], input?: Buffer | string): Buffer {
  const args = input === undefined ? ['exec'] : ['exec', '-i'];
  return execFileSync('docker', [...args, CONTAINER, ...argv], {
    input,
    maxBuffer: 16 * 1024 * 1024
  });
}

/**
 * The shells (and their children started by the startup command) running in
 * the container, from `docker top`. The server's reaper (a root `sh` that
 * kills closing sessions while others run in the container) is no session's.
 */
export function shells(): string[] {
  const out = execFileSync('docker', ['top', CONTAINER, '-o', 'pid,args'], {
    encoding: 'utf-8'
  });
  return out
    .split('\n')
    .slice(1)
    .map(line => line.trim())
    .filter(line => /\b(\/bin\/)?sh\b/.test(line))
    .filter(line => !isReaper(line));
}

/**
 * Whether a line of `docker top` is the server's reaper: its title comes
 * first, because `ps` cuts lines at 80 columns where the engine runs it
 * without a terminal.
 */
export function isReaper(line: string): boolean {
  return (
    line.includes('jupyter-tool-terminal cleanup') ||
    line.includes('JUPYTER_TOOL_TERMINAL_REAPER')
  );
}

/**
 * Shut down every tool terminal session of the test user, and wait until no
 * shell is left in the container. Closing a tab detaches (the session runs on,
 * as JupyterLab's terminal does), so a spec that counts sessions or shells
 * starts from here rather than from what earlier specs left running.
 */
export async function shutDownAllSessions(page: Page): Promise<void> {
  const headers = { Authorization: `token ${TOKEN}` };
  const listed = await page.request.get(`${BASE_URL}tool-terminal/api/sessions`, {
    headers
  });
  expect(listed.status()).toBe(200);
  for (const session of (await listed.json()) as { id: string }[]) {
    const deleted = await page.request.delete(
      `${BASE_URL}tool-terminal/api/sessions/${session.id}`,
      { headers }
    );
    expect([204, 403]).toContain(deleted.status()); // (403: it ended meanwhile)
  }
  await expect.poll(() => shells().length).toBe(0);
}

/**
 * Open JupyterLab under the prefix, logged in with the token (cookie auth for
 * REST and WebSocket afterwards).
 *
 * @param workspace - A JupyterLab workspace of its own, emptied on load:
 *   JupyterLab restores a workspace's layout (open panels) on the next load,
 *   so a spec with its own sees only its own panels, and the other specs
 *   never see them. The default workspace otherwise.
 */
export async function openLab(page: Page, workspace?: string): Promise<void> {
  const path = workspace ? `lab/workspaces/${workspace}?reset&` : 'lab?';
  await page.goto(`${BASE_URL}${path}token=${TOKEN}`);
}

/**
 * The "Tool Terminals" section of the launcher.
 */
export function launcherSection(page: Page): Locator {
  return page.locator('.jp-Launcher-section', {
    has: page.locator('.jp-Launcher-sectionTitle', {
      hasText: 'Tool Terminals'
    })
  });
}

/**
 * The tiles of the "Tool Terminals" launcher section that stand for tool
 * instances (or say why there are none): all but *Connect an Agent*.
 */
export function instanceTiles(page: Page): Locator {
  return launcherSection(page).locator('.jp-LauncherCard', {
    hasNotText: 'Connect an Agent',
    // (Nor the hidden card that gives the section its icon.)
    hasNot: page.locator('.jp-ToolTerminal-sectionIcon')
  });
}

/**
 * The launcher tile of the user's tool instance.
 */
export function launcherTile(page: Page): Locator {
  return launcherSection(page).locator('.jp-LauncherCard', {
    hasText: TILE_LABEL
  });
}

/**
 * The dock tabs of tool terminals on the user's tool instance: titled with
 * the instance's display name, the instance id in the tooltip.
 */
export function terminalTabs(page: Page): Locator {
  return page.locator(
    `.lm-DockPanel-tabBar .jp-ToolTerminal-tab[title*="${CONTAINER}"]`
  );
}

/**
 * The visible terminal panel (the active tool terminal).
 */
export function activeTerminal(page: Page): Locator {
  return page.locator('.jp-ToolTerminal:visible');
}

/**
 * Open JupyterLab, open a tool terminal from the launcher tile and wait for
 * the startup command's banner.
 *
 * @param workspace - The JupyterLab workspace (see {@link openLab}).
 * @returns The terminal panel.
 */
export async function openToolTerminal(
  page: Page,
  workspace?: string
): Promise<Locator> {
  await openLab(page, workspace);
  const tile = launcherTile(page);
  await expect(tile).toBeVisible({ timeout: 60_000 });
  await tile.click();
  const terminal = activeTerminal(page);
  await expect(terminal.locator('.xterm-accessibility-tree')).toContainText(
    BANNER
  );
  return terminal;
}

/**
 * The rows of a terminal's screen, as text (xterm's accessibility tree,
 * present because the user's terminal settings enable the screen reader
 * mode, which the tool terminal follows like JupyterLab's own terminal).
 */
export async function screenLines(terminal: Locator): Promise<string[]> {
  const rows = await terminal
    .locator('.xterm-accessibility-tree > div')
    .allTextContents();
  return rows.map(row => row.replace(/\u00a0/g, ' ').trimEnd());
}

/**
 * Type a command line in a terminal.
 */
export async function typeLine(
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
export async function waitForLine(
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
      {
        message: `a terminal line matching ${pattern}`,
        intervals: [50, 100, 250]
      }
    )
    .toBe(true);
  return found!;
}

/**
 * Run a command of the current tool terminal tab's context menu.
 */
export async function tabMenu(page: Page, label: string): Promise<void> {
  await page
    .locator('.lm-DockPanel-tabBar .jp-ToolTerminal-tab.lm-mod-current')
    .click({ button: 'right' });
  await page.locator('.lm-Menu .lm-Menu-itemLabel', { hasText: label }).click();
}
