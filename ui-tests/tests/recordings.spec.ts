// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * Recordings in JupyterLab (issue 32.11): the user lists their recorded tool
 * terminals, plays one back in a panel, and downloads it (the test holds the
 * Blob handed to the browser's download).
 */
import { expect, test } from "@playwright/test";

import { openToolTerminal, typeLine, waitForLine } from "./helpers";

test("a recorded terminal is listed, played back and downloaded", async ({
  page,
}) => {
  const terminal = await openToolTerminal(page, "recordings");
  await typeLine(page, terminal, "echo played-back-$((5*5))");
  await waitForLine(terminal, /^played-back-25$/);
  await page.keyboard.press("Control+Shift+C");
  await page.keyboard.type("Tool Terminal Recordings");
  await page.keyboard.press("Enter");
  const list = page.locator(".jp-ToolTerminal-recordings");
  await expect(list.locator("tbody tr").first()).toBeVisible();
  // The player shows what the terminal showed (once the recording has it:
  // lines are written when they end).
  await expect(async () => {
    await list.getByRole("button", { name: "Refresh" }).click();
    await list
      .locator("tbody tr")
      .first()
      .getByRole("button", { name: "Play" })
      .click();
    const player = page.locator(".jp-ToolTerminal-player:visible");
    await expect(player.locator(".xterm-rows")).toContainText(
      "played-back-25",
      { timeout: 15_000 },
    );
  }).toPass({ timeout: 60_000 });
  await page.evaluate(() => {
    const saved: { name: string; blob: Blob | null }[] = [];
    (window as unknown as { saved: typeof saved }).saved = saved;
    const createObjectURL = URL.createObjectURL.bind(URL);
    URL.createObjectURL = (blob: Blob | MediaSource) => {
      saved.push({ name: "", blob: blob as Blob });
      return createObjectURL(blob);
    };
    const click = HTMLAnchorElement.prototype.click;
    HTMLAnchorElement.prototype.click = function (this: HTMLAnchorElement) {
      if (this.download && saved.length > 0) {
        saved[saved.length - 1].name = this.download;
      }
      click.call(this);
    };
  });
  await page
    .locator(".lm-DockPanel-tabBar .lm-TabBar-tab", {
      hasText: "Tool Terminal Recordings",
    })
    .click();
  await list
    .locator("tbody tr")
    .first()
    .getByRole("button", { name: "Download" })
    .click();
  await expect
    .poll(() =>
      page.evaluate(async () => {
        const saved = (
          window as unknown as { saved: { name: string; blob: Blob }[] }
        ).saved;
        if (saved.length === 0) {
          return null;
        }
        const text = await saved[0].blob.text();
        return [
          saved[0].name.endsWith(".cast"),
          JSON.parse(text.split("\n")[0]).version,
          text.includes("played-back-25"),
        ];
      }),
    )
    .toEqual([true, 2, true]);
});
