// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * A page reload in service mode: JupyterLab restores the tool terminal
 * panel, which logs in at the service again (a new page has no login of its
 * own yet) and reattaches to the same shell, with its screen.
 */
import { expect, test } from "@playwright/test";

import {
  ALICE_CONTAINER,
  HUB_URL,
  openLabAs,
  openToolTerminal,
  screenText,
  typeLine,
  waitForRow,
} from "./helpers";

test("a reload brings the same shell back through the service", async ({
  browser,
}) => {
  const alice = await openLabAs(browser, "alice", "hub-reload");
  const terminal = await openToolTerminal(alice.page, ALICE_CONTAINER);
  await typeLine(alice.page, terminal, "echo SHELL-$$");
  await expect
    .poll(async () =>
      (await screenText(terminal)).find((row) => /^SHELL-\d+$/.test(row)),
    )
    .toBeTruthy();
  const shell = (await screenText(terminal)).find((row) =>
    /^SHELL-\d+$/.test(row),
  ) as string;

  // The workspace has saved the panel before the reload.
  const workspace = `${HUB_URL}/user/alice/lab/api/workspaces/hub-reload`;
  await expect
    .poll(async () =>
      JSON.stringify(await (await alice.page.request.get(workspace)).json()),
    )
    .toContain('"session"');
  // A reload, as the browser does it (the workspace's URL, without `reset`).
  await alice.page.goto(`${HUB_URL}/user/alice/lab/workspaces/hub-reload`);
  const restored = alice.page.locator(".jp-ToolTerminal:visible");
  await expect(restored.locator(".xterm-helper-textarea")).toHaveCount(1, {
    timeout: 60_000,
  });
  // The screen comes back from the service, then the same shell answers.
  await waitForRow(restored, shell);
  await typeLine(alice.page, restored, "echo AGAIN-$$");
  await waitForRow(restored, shell.replace("SHELL", "AGAIN"));
  // The restored page logged in at the service itself: no page token was sent there.
  expect(
    alice.urls.filter((url) => url.includes("/tool-terminal/login")).length,
  ).toBeGreaterThanOrEqual(2);
});
