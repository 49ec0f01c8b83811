// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * Real-browser test of a read-only view through JupyterHub, with two users
 * at once in browser contexts of their own: alice shares her tool terminal
 * with bob from the panel's context menu, bob opens it from his command
 * palette and sees her screen and live output, his keystrokes reach nothing,
 * and when alice stops sharing his panel says so at once.
 */
import type { Locator, Page } from "@playwright/test";
import { expect, test } from "@playwright/test";

import {
  ALICE_CONTAINER,
  openLabAs,
  openToolTerminal,
  screenText,
  typeLine,
  waitForRow,
} from "./helpers";

/**
 * The rows of a screen that show something: the owner's and the observer's
 * terminals may differ in height, not in what they show.
 */
async function shownRows(terminal: Locator): Promise<string[]> {
  return (await screenText(terminal)).filter((row) => row !== "");
}

/**
 * Wait until the observer shows what the owner shows (both screens are read
 * at each try: xterm updates its accessibility tree a moment after output).
 */
async function expectSameScreen(
  owner: Locator,
  observer: Locator,
): Promise<void> {
  await expect
    .poll(async () => {
      const [shown, watched] = await Promise.all([
        shownRows(owner),
        shownRows(observer),
      ]);
      return JSON.stringify(watched) === JSON.stringify(shown)
        ? "same"
        : JSON.stringify({ shown, watched });
    })
    .toBe("same");
}

/**
 * Run a command of a terminal's context menu (its body, right-clicked).
 */
async function contextMenu(
  page: Page,
  terminal: Locator,
  label: string,
): Promise<void> {
  await terminal.locator(".xterm-screen").click({ button: "right" });
  await page.locator(".lm-Menu .lm-Menu-itemLabel", { hasText: label }).click();
}

test("bob watches alice's terminal read-only, live, until she stops sharing", async ({
  browser,
}) => {
  const [alice, bob] = await Promise.all([
    openLabAs(browser, "alice", "observe"),
    openLabAs(browser, "bob", "observe"),
  ]);
  // What bob's page sends on the terminal sockets it opens.
  const bobSockets: string[] = [];
  const bobSent: string[] = [];
  bob.page.on("websocket", (socket) => {
    if (socket.url().includes("/tool-terminal/websocket/")) {
      bobSockets.push(socket.url());
      socket.on("framesent", (frame) => bobSent.push(String(frame.payload)));
    }
  });

  const terminal = await openToolTerminal(alice.page, ALICE_CONTAINER);
  await typeLine(alice.page, terminal, "echo $((6*7))");
  await waitForRow(terminal, "42");

  // alice shares the terminal with bob, from the panel's context menu.
  await contextMenu(alice.page, terminal, "Share Read-Only…");
  const aliceDialog = alice.page.locator(".jp-Dialog");
  await aliceDialog.locator("input").fill("bob");
  await aliceDialog.getByRole("button", { name: "OK" }).click();
  await expect(aliceDialog).toHaveCount(0);

  // bob finds it in his command palette and opens it.
  await bob.page.keyboard.press("Control+Shift+C");
  await bob.page.keyboard.type("Watch a Shared Tool Terminal");
  await bob.page.keyboard.press("Enter");
  const bobDialog = bob.page.locator(".jp-Dialog");
  await bobDialog
    .locator("select")
    .selectOption({ label: `${ALICE_CONTAINER} of alice` });
  await bobDialog.getByRole("button", { name: "OK" }).click();
  const observer = bob.page.locator(".jp-ToolTerminal-observer:visible");
  await expect(observer.locator(".xterm-helper-textarea")).toHaveCount(1);
  await expect(
    bob.page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current"),
  ).toContainText(`${ALICE_CONTAINER} of alice (read-only)`);

  // The same screen, then the same live output.
  await expectSameScreen(terminal, observer);
  await typeLine(alice.page, terminal, "echo live-$((5*5))");
  await waitForRow(terminal, "live-25");
  await waitForRow(observer, "live-25");
  await expectSameScreen(terminal, observer);

  // bob types: nothing leaves his page, nothing reaches alice's shell. What
  // alice types next shows on both screens, after (or without) his line.
  await typeLine(bob.page, observer, "echo bob-$((3*3))");
  await typeLine(alice.page, terminal, "echo after-$((2*4))");
  await waitForRow(terminal, "after-8");
  await waitForRow(observer, "after-8");
  for (const screen of [terminal, observer]) {
    const rows = await screenText(screen);
    expect(rows.filter((row) => row.includes("bob-"))).toEqual([]);
    expect(rows).not.toContain("9");
  }
  expect(
    bobSent.filter((frame) => /^\["(stdin|set_size)"/.test(frame)),
  ).toEqual([]);

  // alice stops sharing: bob's panel says so at once, without a dialog, and
  // shows nothing more of her terminal.
  await contextMenu(alice.page, terminal, "Stop Sharing Read-Only…");
  await aliceDialog.locator("select").selectOption({ label: "bob" });
  await aliceDialog.getByRole("button", { name: "OK" }).click();
  await expect(
    bob.page.locator(".jp-ToolTerminal-observer .jp-ToolTerminal-status"),
  ).toContainText("The owner stopped sharing this terminal.");
  await expect(bob.page.locator(".jp-Dialog")).toHaveCount(0);
  await typeLine(alice.page, terminal, "echo alone-$((4*4))");
  await waitForRow(terminal, "alone-16");
  expect(await screenText(observer)).not.toContain("alone-16");
  // Detached, not retrying: a revoked view is not reconnected.
  expect(bobSockets).toHaveLength(1);
});
