// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * Real-browser test through JupyterHub in service mode: alice logs in at the
 * Hub, her own JupyterLab (whose server has no container engine) shows her
 * tool tile from the tool-terminal service and opens a terminal through it;
 * bob's launcher shows none of alice's tiles. No token in any URL.
 */
import type { Browser, Locator, Page } from "@playwright/test";
import { expect, test } from "@playwright/test";

function env(name: string): string {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set: run scripts/test-browser-hub.sh`);
  }
  return value;
}

const HUB_URL = env("E2E_HUB_URL");
const PASSWORD = env("E2E_HUB_PASSWORD");
const ALICE_CONTAINER = env("E2E_ALICE_CONTAINER");
const BOB_CONTAINER = env("E2E_BOB_CONTAINER");

/**
 * Log in at the Hub's form and open the user's JupyterLab; every request
 * and WebSocket URL the page uses is recorded.
 */
async function openLabAs(
  browser: Browser,
  user: string,
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
  await page.goto(`${HUB_URL}/user/${user}/lab`);
  return { page, urls };
}

function launcherSection(page: Page): Locator {
  return page.locator(".jp-Launcher-section", {
    has: page.locator(".jp-Launcher-sectionTitle", {
      hasText: "Tool Terminals",
    }),
  });
}

async function screenText(terminal: Locator): Promise<string[]> {
  const rows = await terminal
    .locator(".xterm-accessibility-tree > div")
    .allTextContents();
  return rows.map((row) => row.replace(/\u00a0/g, " ").trim());
}

test("alice opens a tool terminal through the service, bob sees none of hers", async ({
  browser,
}) => {
  const alice = await openLabAs(browser, "alice");
  const tile = launcherSection(alice.page).locator(".jp-LauncherCard", {
    hasText: ALICE_CONTAINER,
  });
  await expect(tile).toBeVisible({ timeout: 60_000 });
  await tile.click();
  const terminal = alice.page.locator(".jp-ToolTerminal:visible");
  await expect(terminal.locator(".xterm-helper-textarea")).toHaveCount(1);
  await terminal.locator(".xterm-helper-textarea").focus();
  await alice.page.keyboard.type("echo $((6*7))");
  await alice.page.keyboard.press("Enter");
  await expect
    .poll(async () => (await screenText(terminal)).includes("42"), {
      timeout: 30_000,
    })
    .toBe(true);
  // Tiles and terminals came from the service, and no URL carried a token.
  expect(
    alice.urls.some((url) =>
      url.includes("/services/tool-terminal/tool-terminal/websocket/"),
    ),
  ).toBe(true);
  expect(alice.urls.filter((url) => /[?&]token=/.test(url))).toEqual([]);

  const bob = await openLabAs(browser, "bob");
  await expect(
    launcherSection(bob.page).locator(".jp-LauncherCard", {
      hasText: BOB_CONTAINER,
    }),
  ).toBeVisible({ timeout: 60_000 });
  await expect(bob.page.getByText(ALICE_CONTAINER)).toHaveCount(0);
});
