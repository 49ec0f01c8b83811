// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * Real-browser tests of what a reload does (the layout restorer reattaches
 * each tool terminal panel to its session while the server keeps it, and
 * says so when the session is gone) and of a stopped instance's tile.
 */
import { execFileSync } from "child_process";

import type { Page } from "@playwright/test";
import { expect, test } from "@playwright/test";

import {
  BANNER,
  BASE_URL,
  CONTAINER,
  TOKEN,
  env,
  launcherSection,
  launcherTile,
  openToolTerminal,
  shells,
  shutDownAllSessions,
  tabMenu,
  terminalTabs,
  typeLine,
  waitForLine,
} from "./helpers";

const WORKSPACE = "reload";

/**
 * Load the workspace again, as a browser reload does (without `reset`).
 */
async function reload(page: Page): Promise<void> {
  await page.goto(`${BASE_URL}lab/workspaces/${WORKSPACE}`);
}

/**
 * The user's sessions, from the REST API.
 */
async function sessions(page: Page): Promise<{ id: string }[]> {
  const response = await page.request.get(
    `${BASE_URL}tool-terminal/api/sessions`,
    { headers: { Authorization: `token ${TOKEN}` } },
  );
  expect(response.status()).toBe(200);
  return response.json();
}

// Earlier specs' detached sessions would count (closing a tab keeps a session).
test.beforeEach(async ({ page }) => {
  await shutDownAllSessions(page);
});

test("a reload reattaches the panel to the same shell", async ({ page }) => {
  const refused: string[] = [];
  page.on("response", (response) => {
    if (response.status() === 403 && response.url().includes("tool-terminal")) {
      refused.push(response.url());
    }
  });
  const terminal = await openToolTerminal(page, WORKSPACE);
  await typeLine(page, terminal, "cd /tmp; export MARK=kept; echo PID=$$");
  const pid = await waitForLine(terminal, /^PID=(\d+)$/);
  const before = await sessions(page);
  expect(before).toHaveLength(1);
  // The workspace has saved the panel (and its session) before the reload.
  await expect
    .poll(async () => {
      const response = await page.request.get(
        `${BASE_URL}lab/api/workspaces/${WORKSPACE}`,
        { headers: { Authorization: `token ${TOKEN}` } },
      );
      return JSON.stringify(await response.json());
    })
    .toContain(before[0].id);

  await reload(page);
  await expect(terminalTabs(page)).toHaveCount(1);
  const restored = page.locator(".jp-ToolTerminal:visible");
  // The same shell: same PID, working directory and variables.
  await typeLine(page, restored, "echo AFTER=$$:$PWD:$MARK");
  await waitForLine(restored, new RegExp(`^AFTER=${pid[1]}:/tmp:kept$`));
  // The screen came back too (the recent output, before the new line).
  await expect(restored.locator(".xterm-accessibility-tree")).toContainText(
    `PID=${pid[1]}`,
  );
  expect(await sessions(page)).toEqual([
    expect.objectContaining({ id: before[0].id }),
  ]);
  expect(page.locator(".jp-Dialog")).toHaveCount(0);

  // The session ends while no page is attached: the restored panel says so
  // and offers a new session; no error dialog, no 403 in the console.
  await page.goto("about:blank");
  const gone = await page.request.delete(
    `${BASE_URL}tool-terminal/api/sessions/${before[0].id}`,
    { headers: { Authorization: `token ${TOKEN}` } },
  );
  expect(gone.status()).toBe(204);
  await reload(page);
  const status = page.locator(".jp-ToolTerminal-status:visible");
  await expect(status).toContainText("has ended");
  await expect(page.locator(".jp-Dialog")).toHaveCount(0);
  expect(refused).toEqual([]);
  // It starts no shell by itself, not even after another reload.
  expect(await sessions(page)).toEqual([]);
  await reload(page);
  await expect(status).toContainText("has ended");
  expect(await sessions(page)).toEqual([]);
  await status.getByRole("button", { name: "Start a new session" }).click();
  const fresh = page.locator(".jp-ToolTerminal:visible");
  await expect(fresh.locator(".xterm-accessibility-tree")).toContainText(
    BANNER,
  );
  await typeLine(page, fresh, "echo NEW=$$");
  await waitForLine(fresh, /^NEW=(\d+)$/, (m) => m[1] !== pid[1]);

  // Shutting the panel's session down kills it at once, grace or not
  // (closing the tab would detach: see everyday-terminal.spec.ts).
  expect(shells().length).toBeGreaterThan(0);
  await tabMenu(page, "Shut Down Tool Terminal Session");
  await expect(terminalTabs(page)).toHaveCount(0);
  await expect.poll(() => shells(), { timeout: 15_000 }).toEqual([]);
  await expect.poll(() => sessions(page)).toEqual([]);
  expect(refused).toEqual([]);
});

test("after a reload the Running panel's first view lists the restored panels' sessions", async ({
  page,
}) => {
  const workspace = "reload-running";
  // Two panels on the instance, and the Running panel open beside them.
  const terminal = await openToolTerminal(page, workspace);
  await typeLine(page, terminal, "echo FIRST=$$");
  await waitForLine(terminal, /^FIRST=\d+$/);
  await page.locator(".lm-DockPanel-tabBar .lm-TabBar-addButton").click();
  await launcherTile(page).click();
  await expect(terminalTabs(page)).toHaveCount(2);
  await page.locator('.jp-SideBar [data-id="jp-running-sessions"]').click();
  const items = page
    .getByRole("region", { name: "Tool Terminals Section" })
    .locator(".jp-RunningSessions-item");
  await expect(items).toHaveCount(2);
  const ids = (await sessions(page)).map((session) => session.id);
  expect(ids).toHaveLength(2);
  // The workspace has saved both panels, with their sessions, and the
  // Running panel as the left sidebar's open panel.
  await expect
    .poll(async () => {
      const response = await page.request.get(
        `${BASE_URL}lab/api/workspaces/${workspace}`,
        { headers: { Authorization: `token ${TOKEN}` } },
      );
      const saved = (await response.json()) as {
        data: Record<string, { left?: { current?: string } }>;
      };
      const text = JSON.stringify(saved);
      return (
        ids.every((id) => text.includes(id)) &&
        saved.data["layout-restorer:data"]?.left?.current === "running-sessions"
      );
    })
    .toBe(true);

  // How many entries the section's list holds when it is first drawn after
  // the reload, watched from inside the page: a later refresh of the list
  // must not make up for a first view without them.
  await page.addInitScript(() => {
    const probe = window as unknown as { firstDrawn?: number };
    const observer = new MutationObserver(() => {
      // (The section is the region its accordion title labels.)
      const section = Array.from(
        document.querySelectorAll(".jp-RunningSessions-section"),
      ).find((node) =>
        document
          .getElementById(node.getAttribute("aria-labelledby") ?? "")
          ?.textContent?.includes("Tool Terminals"),
      );
      const list = section?.querySelector(
        ".jp-RunningSessions-sectionContainer",
      );
      if (list) {
        probe.firstDrawn = list.querySelectorAll(
          ".jp-RunningSessions-item",
        ).length;
        observer.disconnect();
      }
    });
    observer.observe(document, {
      subtree: true,
      childList: true,
      attributes: true,
      attributeFilter: ["aria-labelledby"],
    });
  });
  await page.goto(`${BASE_URL}lab/workspaces/${workspace}`);
  await expect(terminalTabs(page)).toHaveCount(2);
  await expect(items).toHaveCount(2);
  await expect(items.first()).toBeVisible();
  expect(
    await page.evaluate(
      () => (window as unknown as { firstDrawn?: number }).firstDrawn,
    ),
  ).toBe(2);
  // The same sessions, reattached (none started anew).
  expect((await sessions(page)).map((session) => session.id).sort()).toEqual(
    [...ids].sort(),
  );
  await shutDownAllSessions(page);
});

test("an instance that stops: the terminal says so, its tile looks stopped and opens no tab", async ({
  page,
}) => {
  const name = `${CONTAINER}-stops`;
  execFileSync("docker", [
    "run",
    "-d",
    "--init",
    "--network",
    "none",
    "--label",
    `jupyter-tool-terminal.owner=${env("E2E_OWNER")}`,
    "--label",
    `jupyter-tool-terminal.tool=${env("E2E_TOOL")}`,
    "--name",
    name,
    env("E2E_IMAGE"),
  ]);
  try {
    await page.goto(`${BASE_URL}lab/workspaces/stopped?reset&token=${TOKEN}`);
    const tile = () =>
      launcherSection(page).locator(".jp-LauncherCard", { hasText: name });
    await expect(tile()).toBeVisible({ timeout: 60_000 });
    await expect(tile().locator(".jp-ToolTerminal-stopped")).toHaveCount(0);
    await tile().click();
    const terminal = page.locator(".jp-ToolTerminal:visible");
    await expect(terminal.locator(".xterm-accessibility-tree")).toContainText(
      BANNER,
    );
    // The session is listed in JupyterLab's Running panel.
    await page.locator('.jp-SideBar [data-id="jp-running-sessions"]').click();
    const running = page.locator("#jp-running-sessions");
    await expect(running).toContainText("Tool Terminals");
    await expect(running).toContainText(name);

    execFileSync("docker", ["stop", "-t", "0", name]);
    const status = page.locator(".jp-ToolTerminal-status:visible");
    await expect(status).toContainText(`The tool instance ${name} stopped`);
    await expect(
      status.getByRole("button", { name: "Start a new session" }),
    ).toBeVisible();
    await expect(running).not.toContainText(name, { timeout: 30_000 });

    // A new launcher lists the instance again: stopped, greyed out.
    await page.locator(".lm-DockPanel-tabBar .lm-TabBar-addButton").click();
    await expect(tile()).toContainText("exited");
    await expect(tile().locator(".jp-ToolTerminal-stopped")).toHaveCount(1);
    expect(
      await tile().evaluate((node) => Number(getComputedStyle(node).opacity)),
    ).toBeLessThan(1);
    const tabs = await page.locator(".jp-ToolTerminal-tab").count();
    await tile().click();
    const dialog = page.locator(".jp-Dialog");
    await expect(dialog).toContainText(name);
    await expect(dialog).toContainText("Start it");
    await dialog.getByRole("button", { name: "OK" }).click();
    await expect(page.locator(".jp-ToolTerminal-tab")).toHaveCount(tabs);
  } finally {
    execFileSync("docker", ["rm", "-f", name]);
  }
});
