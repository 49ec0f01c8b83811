// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * The everyday UI around the terminals: a launcher left open follows its
 * tiles' states, several panels on one instance are told apart, and the
 * Running panel lists and shuts down every terminal, also ones opened a
 * moment before. Each test uses a container of its own.
 */
import { execFileSync } from "child_process";

import type { Page } from "@playwright/test";
import { expect, test } from "@playwright/test";

import {
  BANNER,
  BASE_URL,
  DISPLAY_NAME,
  env,
  isReaper,
  launcherSection,
  TOKEN,
} from "./helpers";

/**
 * Run a labelled tool container of the test user's; removed by the caller.
 */
function startContainer(name: string): void {
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
}

/**
 * The shells in a container (its PID 1, the init, is not one).
 */
function shellsIn(name: string): string[] {
  const out = execFileSync("docker", ["top", name, "-o", "pid,args"], {
    encoding: "utf-8",
  });
  return out
    .split("\n")
    .slice(1)
    .filter((line) => /\bsh\b/.test(line))
    .filter((line) => !isReaper(line));
}

async function openWorkspace(page: Page, workspace: string): Promise<void> {
  await page.goto(
    `${BASE_URL}lab/workspaces/${workspace}?reset&token=${TOKEN}`,
  );
}

test("a launcher left open follows its tile through docker stop and start", async ({
  page,
}) => {
  const name = `jtt-e2e-states-${process.pid}`;
  startContainer(name);
  try {
    await openWorkspace(page, "states");
    const tile = launcherSection(page).locator(".jp-LauncherCard", {
      hasText: name,
    });
    await expect(tile).toBeVisible({ timeout: 60_000 });
    await expect(tile.locator(".jp-ToolTerminal-stopped")).toHaveCount(0);
    // Within the list's refresh interval (10 s), without a new launcher.
    execFileSync("docker", ["stop", "-t", "0", name]);
    await expect(tile).toContainText("exited", { timeout: 25_000 });
    await expect(tile.locator(".jp-ToolTerminal-stopped")).toHaveCount(1);
    execFileSync("docker", ["start", name]);
    await expect(tile).not.toContainText("exited", { timeout: 25_000 });
    await expect(tile.locator(".jp-ToolTerminal-stopped")).toHaveCount(0);
  } finally {
    execFileSync("docker", ["rm", "-f", name]);
  }
});

test("panels on one instance are numbered; Shut Down All ends every one, also those just opened", async ({
  page,
}) => {
  const name = `jtt-e2e-many-${process.pid}`;
  startContainer(name);
  try {
    await openWorkspace(page, "many");
    const tile = launcherSection(page).locator(".jp-LauncherCard", {
      hasText: name,
    });
    await expect(tile).toBeVisible({ timeout: 60_000 });
    const tabs = page.locator(
      `.lm-DockPanel-tabBar .jp-ToolTerminal-tab[title*="${name}"]`,
    );
    await tile.click();
    await expect(
      page
        .locator(".jp-ToolTerminal:visible .xterm-accessibility-tree")
        .first(),
    ).toContainText(BANNER);
    await expect(tabs).toHaveText([DISPLAY_NAME]);
    // A second panel on the same instance: both tabs and tooltips numbered.
    await page.locator(".lm-DockPanel-tabBar .lm-TabBar-addButton").click();
    await tile.click();
    await expect(tabs).toHaveText([
      `${DISPLAY_NAME} (1)`,
      `${DISPLAY_NAME} (2)`,
    ]);
    await expect(tabs.nth(1)).toHaveAttribute(
      "title",
      /Terminal 2 in tool instance/,
    );

    // The Running panel lists a terminal as soon as it is open.
    await page.locator('.jp-SideBar [data-id="jp-running-sessions"]').click();
    // (The section's title, with its toolbar, is a sibling of its list.)
    const heading = page.getByRole("heading", {
      name: "Tool Terminals Section",
    });
    const items = page
      .getByRole("region", { name: "Tool Terminals Section" })
      .locator(".jp-RunningSessions-item");
    await expect(items).toHaveCount(2, { timeout: 5_000 });
    // Two more, and Shut Down All at once: none of them survives.
    for (let i = 0; i < 2; i++) {
      await page.locator(".lm-DockPanel-tabBar .lm-TabBar-addButton").click();
      await tile.click();
    }
    await expect(tabs).toHaveCount(4);
    await expect.poll(() => shellsIn(name).length).toBeGreaterThanOrEqual(4);
    await heading.getByRole("button", { name: "Shut Down All" }).click();
    await page
      .locator(".jp-Dialog")
      .getByRole("button", { name: "Shut Down All" })
      .click();
    await expect(tabs).toHaveCount(0);
    await expect.poll(() => shellsIn(name), { timeout: 15_000 }).toEqual([]);
    await expect(items).toHaveCount(0);
  } finally {
    execFileSync("docker", ["rm", "-f", name]);
  }
});

test("terminals in two instances of one tool type: tabs and Running entries name instance and terminal; the status bar says user@instance", async ({
  page,
}) => {
  const first = `jtt-e2e-twin-a-${process.pid}`;
  const second = `jtt-e2e-twin-b-${process.pid}`;
  startContainer(first);
  startContainer(second);
  try {
    await openWorkspace(page, "twins");
    const tile = (name: string) =>
      launcherSection(page).locator(".jp-LauncherCard", { hasText: name });
    // (A launcher closes when it opens a terminal: a new one for the next.)
    const open = async (name: string, newLauncher = true) => {
      if (newLauncher) {
        await page.locator(".lm-DockPanel-tabBar .lm-TabBar-addButton").click();
      }
      await tile(name).click();
      await expect(
        page.locator(".jp-ToolTerminal:visible .xterm-accessibility-tree"),
      ).toContainText(BANNER);
    };
    await expect(tile(first)).toBeVisible({ timeout: 60_000 });
    await expect(tile(second)).toBeVisible();
    await open(first, false);
    await open(second);
    await open(first);
    const twins = page.locator(
      `.lm-DockPanel-tabBar .jp-ToolTerminal-tab[title*="jtt-e2e-twin-"]`,
    );
    const titles = [
      `${DISPLAY_NAME} (${first}, 1)`,
      `${DISPLAY_NAME} (${second})`,
      `${DISPLAY_NAME} (${first}, 2)`,
    ];
    await expect(twins).toHaveText(titles);
    // The Running panel names them the same way.
    await page.locator('.jp-SideBar [data-id="jp-running-sessions"]').click();
    const entries = page
      .getByRole("region", { name: "Tool Terminals Section" })
      .locator(".jp-RunningSessions-item", { hasText: "jtt-e2e-twin-" })
      .locator(".jp-RunningSessions-itemLabel");
    await expect(entries).toHaveCount(3);
    expect((await entries.allTextContents()).sort()).toEqual(
      [...titles].sort(),
    );
    // The status bar follows the focused terminal: user@instance.
    const where = page.locator(".jp-ToolTerminal-where");
    for (const [index, name] of [first, second, first].entries()) {
      await twins.nth(index).click();
      await expect(where).toHaveText(`root@${name}`);
    }
  } finally {
    execFileSync("docker", ["rm", "-f", first, second]);
  }
});
