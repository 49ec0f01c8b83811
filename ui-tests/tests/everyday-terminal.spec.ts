// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * The everyday terminal, as a JupyterLab user expects it beside JupyterLab's
 * own: closing a tab detaches (the session is reopened from the Running
 * panel), a live switch to JupyterLab Dark turns the terminal dark, its
 * context menu has no duplicate or dead entries, Ctrl+F searches its
 * scrollback, and a program's OSC 52 copy reaches the clipboard.
 */
import type { Page } from "@playwright/test";
import { expect, test } from "@playwright/test";

import {
  activeTerminal,
  CONTAINER,
  openToolTerminal,
  shells,
  tabMenu,
  terminalTabs,
  typeLine,
  waitForLine,
} from "./helpers";

/**
 * The background colour xterm.js paints the terminal with.
 */
async function terminalBackground(page: Page): Promise<string> {
  return page
    .locator(".jp-ToolTerminal:visible .xterm-viewport")
    .evaluate((node) => getComputedStyle(node).backgroundColor);
}

/**
 * Whether an `rgb(...)` colour is dark.
 */
function isDark(color: string): boolean {
  const [r, g, b] = (color.match(/\d+/g) ?? ["255", "255", "255"]).map(Number);
  return (r + g + b) / 3 < 128;
}

/**
 * Choose a JupyterLab theme from the Settings menu.
 */
async function chooseTheme(page: Page, theme: string): Promise<void> {
  await page.locator(".lm-MenuBar-itemLabel", { hasText: "Settings" }).click();
  await page
    .locator(".lm-Menu-itemLabel", { hasText: /^Theme$/ })
    .first()
    .click();
  await page.locator(".lm-Menu-itemLabel", { hasText: theme }).first().click();
}

test("closing a tab detaches; the Running panel reopens the same shell", async ({
  page,
}) => {
  const terminal = await openToolTerminal(page, "detach");
  await typeLine(page, terminal, "export MARK=kept-$$; echo PID=$$");
  const pid = await waitForLine(terminal, /^PID=(\d+)$/);
  const before = shells().length;
  // The tab's close button: the panel goes, the shell stays.
  await terminalTabs(page).locator(".lm-TabBar-tabCloseIcon").click();
  await expect(terminalTabs(page)).toHaveCount(0);
  await page.locator('.jp-SideBar [data-id="jp-running-sessions"]').click();
  const items = page
    .getByRole("region", { name: "Tool Terminals Section" })
    .locator(".jp-RunningSessions-item");
  await expect(items).toHaveCount(1);
  // Still there after the server's grace for reloads would have let it go?
  // (The suite's grace is 60 s; the session has no timer at all now.)
  expect(shells().length).toBe(before);
  await items.first().locator(".jp-RunningSessions-itemLabel").click();
  const again = activeTerminal(page);
  await typeLine(page, again, "echo AGAIN=$MARK");
  await waitForLine(again, new RegExp(`^AGAIN=kept-${pid[1]}$`));
  // Shut down from the Running panel: the shell is gone.
  await items
    .first()
    .locator('button[title="Shut Down"], .jp-RunningSessions-itemShutdown')
    .first()
    .click();
  await expect(items).toHaveCount(0);
  await expect
    .poll(() => shells().length, { timeout: 30_000 })
    .toBeLessThan(before);
});

test("the context menu has one Copy and one Paste, and no dead entries", async ({
  page,
}) => {
  const terminal = await openToolTerminal(page, "context-menu");
  await terminal.locator(".xterm-screen").click({ button: "right" });
  const menu = page.locator(".lm-Menu").last();
  await expect(menu).toBeVisible();
  // (Lumino keeps the items a command hides, invisible, in the menu.)
  const labels = await menu.getByRole("menuitem").allTextContents();
  expect(labels.filter((label) => label === "Copy")).toHaveLength(1);
  expect(labels.filter((label) => label === "Paste")).toHaveLength(1);
  expect(labels).not.toContain("Refresh Terminal");
  expect(labels).not.toContain("New Tool Terminal Session");
  await page.keyboard.press("Escape");
  // (Closing the tab would leave the session running for the next tests.)
  await tabMenu(page, "Shut Down Tool Terminal Session");
});

test("a live switch to JupyterLab Dark turns the terminal dark at once", async ({
  page,
}) => {
  const terminal = await openToolTerminal(page, "dark");
  await typeLine(page, terminal, "echo theme");
  expect(isDark(await terminalBackground(page))).toBe(false);
  const panel = await terminal.boundingBox();
  await chooseTheme(page, "JupyterLab Dark");
  await expect
    .poll(async () => isDark(await terminalBackground(page)))
    .toBe(true);
  // And it still fills its panel.
  const screen = await terminal.locator(".xterm-screen").boundingBox();
  expect(screen!.width).toBeGreaterThan(panel!.width * 0.9);
  await chooseTheme(page, "JupyterLab Light");
  await expect
    .poll(async () => isDark(await terminalBackground(page)))
    .toBe(false);
  await tabMenu(page, "Shut Down Tool Terminal Session");
});

test("Ctrl+F searches the scrollback, not in a full-screen program", async ({
  page,
}) => {
  const terminal = await openToolTerminal(page, "search");
  // Three lines of output, and the command line itself: four matches.
  await typeLine(page, terminal, "for i in 1 2 3; do echo FIND-ME-$i; done");
  await waitForLine(terminal, /^FIND-ME-3$/);
  await typeLine(page, terminal, "seq 1 200");
  await waitForLine(terminal, /^200$/);
  await terminal.locator(".xterm-helper-textarea").focus();
  await page.keyboard.press("Control+f");
  const input = page.locator(".jp-DocumentSearch-input").first();
  await expect(input).toBeVisible();
  await input.fill("FIND-ME-");
  await expect(page.locator(".jp-DocumentSearch-index-counter")).toContainText(
    "/4",
  );
  await page.keyboard.press("Escape");
  await expect(input).toHaveCount(0);
  // In vi (the alternate screen) Ctrl+F is the program's: no search bar.
  await typeLine(page, terminal, "vi /tmp/search-test");
  await waitForLine(terminal, /search-test/);
  await terminal.locator(".xterm-helper-textarea").focus();
  await page.keyboard.press("Control+f");
  await page.keyboard.type(":q!");
  await page.keyboard.press("Enter");
  await expect(input).toHaveCount(0);
  await tabMenu(page, "Shut Down Tool Terminal Session");
});

test("a program's OSC 52 copy reaches the clipboard", async ({
  page,
  context,
}) => {
  await context.grantPermissions(["clipboard-read", "clipboard-write"]);
  const terminal = await openToolTerminal(page, "osc52");
  // The status bar says where the shell runs: user@instance.
  await expect(page.locator(".jp-ToolTerminal-where")).toHaveText(
    `root@${CONTAINER}`,
  );
  await typeLine(
    page,
    terminal,
    "printf '\\033]52;c;%s\\007' $(printf 'copied by osc 52' | base64); echo SENT",
  );
  await waitForLine(terminal, /^SENT$/);
  await expect
    .poll(() => page.evaluate(() => navigator.clipboard.readText()))
    .toBe("copied by osc 52");
  await tabMenu(page, "Shut Down Tool Terminal Session");
});
