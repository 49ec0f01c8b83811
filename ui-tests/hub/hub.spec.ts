// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * Real-browser test through JupyterHub in service mode: alice logs in at the
 * Hub, her own JupyterLab (whose server has no container engine) shows her
 * tool tile from the tool-terminal service and opens a terminal through it;
 * bob's launcher shows none of alice's tiles. No token in any URL.
 */
import { expect, test } from "@playwright/test";

import {
  ALICE_CONTAINER,
  BOB_CONTAINER,
  launcherSection,
  openLabAs,
  openToolTerminal,
  typeLine,
  waitForRow,
} from "./helpers";

test("alice opens a tool terminal through the service, bob sees none of hers", async ({
  browser,
}) => {
  const alice = await openLabAs(browser, "alice");
  const terminal = await openToolTerminal(alice.page, ALICE_CONTAINER);
  await typeLine(alice.page, terminal, "echo $((6*7))");
  await waitForRow(terminal, "42");
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
