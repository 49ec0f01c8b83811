// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * Helpers shared by the specs through JupyterHub: the environment that
 * tests/support/hub_browser.py sets, a user's login, and the terminal screen as text.
 */
import type { Browser, Locator, Page } from "@playwright/test";
import { expect } from "@playwright/test";

/**
 * A variable of the environment tests/support/hub_browser.py sets.
 */
export function env(name: string): string {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set: run scripts/test-browser-hub.sh`);
  }
  return value;
}

export const HUB_URL = env("E2E_HUB_URL");
export const PASSWORD = env("E2E_HUB_PASSWORD");
export const ALICE_CONTAINER = env("E2E_ALICE_CONTAINER");
export const BOB_CONTAINER = env("E2E_BOB_CONTAINER");

/**
 * Log in at the Hub's form, in a browser context of the user's own, and
 * open the user's JupyterLab; every request and WebSocket URL the page uses
 * is recorded.
 *
 * @param workspace - A JupyterLab workspace of its own, emptied on load: a
 *   workspace keeps the open panels for the next load, so a spec with its
 *   own sees only its own panels. The default workspace otherwise.
 */
export async function openLabAs(
  browser: Browser,
  user: string,
  workspace?: string,
): Promise<{ page: Page; urls: string[] }> {
  const context = await browser.newContext();
  const page = await context.newPage();
  const urls: string[] = [];
  page.on("request", (request) => urls.push(request.url()));
  page.on("websocket", (socket) => urls.push(socket.url()));
  await page.goto(`${HUB_URL}/hub/login`);
  await page.fill("#username_input", user);
  await page.fill("#password_input", PASSWORD);
  await page.click("#login_submit");
  await page.waitForURL(/\/hub\/|\/user\//);
  const path = workspace ? `lab/workspaces/${workspace}?reset` : "lab";
  await page.goto(`${HUB_URL}/user/${user}/${path}`);
  return { page, urls };
}

/**
 * The "Tool Terminals" section of the launcher.
 */
export function launcherSection(page: Page): Locator {
  return page.locator(".jp-Launcher-section", {
    has: page.locator(".jp-Launcher-sectionTitle", {
      hasText: "Tool Terminals",
    }),
  });
}

/**
 * Open a tool terminal from the launcher tile of instance `container`.
 *
 * @returns The terminal panel.
 */
export async function openToolTerminal(
  page: Page,
  container: string,
): Promise<Locator> {
  const tile = launcherSection(page).locator(".jp-LauncherCard", {
    hasText: container,
  });
  await expect(tile).toBeVisible({ timeout: 60_000 });
  await tile.click();
  const terminal = page.locator(".jp-ToolTerminal:visible");
  await expect(terminal.locator(".xterm-helper-textarea")).toHaveCount(1);
  return terminal;
}

/**
 * The rows of a terminal's screen, as text (xterm's accessibility tree: the
 * users' settings enable the screen reader mode).
 */
export async function screenText(terminal: Locator): Promise<string[]> {
  const rows = await terminal
    .locator(".xterm-accessibility-tree > div")
    .allTextContents();
  return rows.map((row) => row.replace(/\u00a0/g, " ").trim());
}

/**
 * Type a line into a terminal, as the user does.
 */
export async function typeLine(
  page: Page,
  terminal: Locator,
  line: string,
): Promise<void> {
  await terminal.locator(".xterm-helper-textarea").focus();
  await page.keyboard.type(line);
  await page.keyboard.press("Enter");
}

/**
 * Wait until a terminal shows a row that is exactly `row`.
 */
export async function waitForRow(
  terminal: Locator,
  row: string,
): Promise<void> {
  await expect
    .poll(async () => (await screenText(terminal)).includes(row), {
      message: `a terminal row "${row}"`,
      timeout: 30_000,
    })
    .toBe(true);
}
