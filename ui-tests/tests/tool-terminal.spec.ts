// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * Real-browser end-to-end test: JupyterLab with jupyter-tool-terminal,
 * served under a JupyterHub-like prefix, against the real Docker Engine and
 * a labelled tool container (started by scripts/test-browser.sh).
 */
import { expect, test } from "@playwright/test";

import {
  BANNER,
  activeTerminal,
  env,
  instanceTiles,
  launcherSection,
  launcherTile,
  openLab,
  screenLines,
  shells,
  shutDownAllSessions,
  tabMenu,
  terminalTabs,
  typeLine,
  waitForLine,
} from "./helpers";

const OTHER_CONTAINER = env("E2E_OTHER_CONTAINER");

// Earlier specs' detached sessions would count (closing a tab keeps a session).
test.beforeEach(async ({ page }) => {
  await shutDownAllSessions(page);
});

test("launcher tile, terminal, resize, exit, reset and close", async ({
  page,
}) => {
  // JupyterLab under the prefix, logged in with the token (cookie auth for
  // REST and WebSocket afterwards).
  await openLab(page);

  // Launcher: one tile for the user's instance, in "Tool Terminals"; none
  // for the instance of another owner.
  const section = launcherSection(page);
  const tile = launcherTile(page);
  await expect(tile).toBeVisible({ timeout: 60_000 });
  await expect(instanceTiles(page)).toHaveCount(1);
  await expect(page.getByText(OTHER_CONTAINER)).toHaveCount(0);
  // The tool type's own SVG icon is on the tile.
  await expect(tile.locator("svg [data-e2e-icon]")).toHaveCount(1);
  // The section is headed by the extension's own icon, not the first tile's.
  const header = section.locator(".jp-Launcher-sectionHeader");
  await expect(
    header.locator(".jp-ToolTerminal-sectionIcon"),
  ).toBeVisible();
  await expect(header.locator("svg [data-e2e-icon]")).toHaveCount(0);
  await expect(section.locator(".jp-LauncherCard:visible")).toHaveCount(
    (await section.locator(".jp-LauncherCard").count()) - 1,
  );
  await section.scrollIntoViewIfNeeded();

  // Open a terminal from the tile: the tab names the instance, the startup
  // command's banner comes first.
  await tile.click();
  const tab = terminalTabs(page);
  await expect(tab).toHaveCount(1);
  const terminal = activeTerminal(page);
  await expect(terminal.locator(".xterm-accessibility-tree")).toContainText(
    BANNER,
  );
  expect(shells().length).toBeGreaterThan(0);

  await typeLine(page, terminal, "echo $((6*7))");
  await waitForLine(terminal, /^42$/);

  // The PTY has the panel's size, and follows the browser window.
  await typeLine(page, terminal, "echo SIZE=$(stty size)");
  const before = await waitForLine(terminal, /^SIZE=(\d+) (\d+)$/);
  const rowsBefore = (await screenLines(terminal)).length;
  expect(Number(before[1])).toBe(rowsBefore);

  await page.setViewportSize({ width: 960, height: 560 });
  await expect
    .poll(async () => (await screenLines(terminal)).length)
    .toBeLessThan(rowsBefore);
  const rowsAfter = (await screenLines(terminal)).length;
  await expect(async () => {
    await typeLine(page, terminal, "clear; echo SIZE=$(stty size)");
    const after = await waitForLine(terminal, /^SIZE=(\d+) (\d+)$/);
    expect(after[0]).not.toBe(before[0]);
    expect(Number(after[1])).toBe(rowsAfter);
    expect(Number(after[2])).toBeLessThan(Number(before[2]));
  }).toPass({ timeout: 30_000 });

  // The shell is killed: the panel stays (whatever "Close on exit" says),
  // shows the exit code and offers a new session.
  await typeLine(page, terminal, "clear; kill -9 $$");
  const status = page.locator(".jp-ToolTerminal-status:visible");
  await expect(status).toContainText("exited with code 137");
  await expect.poll(() => shells().length).toBe(0);
  await status.getByRole("button", { name: "Start a new session" }).click();
  await expect(status).toHaveCount(0);
  await expect(terminal.locator(".xterm-accessibility-tree")).toContainText(
    BANNER,
  );
  await typeLine(page, terminal, "echo $((6*7))");
  await waitForLine(terminal, /^42$/);

  // Reset from the tab's context menu: a new shell (new PID) in the same
  // panel, after the startup command's banner again.
  await typeLine(page, terminal, "clear; echo PID=$$");
  const pid = await waitForLine(terminal, /^PID=(\d+)$/);
  await expect(terminal.locator(".xterm-accessibility-tree")).not.toContainText(
    BANNER,
  );
  await tabMenu(page, "Reset Tool Terminal Session");
  await expect(terminal.locator(".xterm-accessibility-tree")).toContainText(
    BANNER,
  );
  await expect(async () => {
    await typeLine(page, terminal, "echo PID=$$");
    await waitForLine(terminal, /^PID=(\d+)$/, (m) => m[1] !== pid[1]);
  }).toPass({ timeout: 30_000 });

  // A second panel on the same instance is an independent session.
  const shellsOfOne = shells().length;
  await page.locator(".lm-DockPanel-tabBar .lm-TabBar-addButton").click();
  await tile.click();
  await expect(tab).toHaveCount(2);
  const second = activeTerminal(page);
  await expect(second.locator(".xterm-accessibility-tree")).toContainText(
    BANNER,
  );
  await expect.poll(() => shells().length).toBe(2 * shellsOfOne);
  await typeLine(page, second, "echo PID=$$");
  await waitForLine(second, /^PID=(\d+)$/, (m) => m[1] !== pid[1]);
  await tabMenu(page, "Shut Down Tool Terminal Session");
  await expect(tab).toHaveCount(1);
  await expect.poll(() => shells().length).toBe(shellsOfOne);
  await tab.click();

  // Close the session from the tab's context menu: the panel closes and the
  // shell is gone from the container.
  expect(shells().length).toBeGreaterThan(0);
  await tabMenu(page, "Shut Down Tool Terminal Session");
  await expect(tab).toHaveCount(0);
  await expect.poll(() => shells(), { timeout: 30_000 }).toEqual([]);
});
