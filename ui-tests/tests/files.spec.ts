// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * Files into and out of the tool instance (issue 32.8): a file dropped onto a
 * tool terminal lands in the shell's current folder; an item of JupyterLab's
 * file browser dropped the same way too; "Download from Tool Instance…" in the
 * terminal's context menu downloads a file (browser downloads do not land on
 * disk here: the test holds the download's response instead).
 */
import { expect, test } from "@playwright/test";

import {
  BASE_URL,
  dockerExec,
  openToolTerminal,
  TOKEN,
  typeLine,
  waitForLine,
} from "./helpers";

test("a file dropped onto a tool terminal lands in its current folder", async ({
  page,
}) => {
  const terminal = await openToolTerminal(page, "files-drop");
  const folder = `/tmp/drop-${process.pid}`;
  dockerExec(["mkdir", "-p", folder]);
  await typeLine(page, terminal, `cd ${folder} && echo IN-$((1+1))`);
  await waitForLine(terminal, /^IN-2$/);
  await terminal.evaluate((node) => {
    const transfer = new DataTransfer();
    transfer.items.add(
      new File(["dropped from the desktop\n"], "dropped.txt", {
        type: "text/plain",
      }),
    );
    const init = { dataTransfer: transfer, bubbles: true, cancelable: true };
    node.dispatchEvent(new DragEvent("dragover", init));
    node.dispatchEvent(new DragEvent("drop", init));
  });
  await expect(
    page.locator(".jp-toast-message", {
      hasText: `Uploaded dropped.txt to ${folder}/dropped.txt`,
    }),
  ).toBeVisible();
  expect(dockerExec(["cat", `${folder}/dropped.txt`]).toString()).toBe(
    "dropped from the desktop\n",
  );
  // Dropped again: the user is asked before it is replaced.
  await terminal.evaluate((node) => {
    const transfer = new DataTransfer();
    transfer.items.add(new File(["second\n"], "dropped.txt"));
    const init = { dataTransfer: transfer, bubbles: true, cancelable: true };
    node.dispatchEvent(new DragEvent("drop", init));
  });
  const dialog = page.locator(".jp-Dialog", { hasText: "Replace File?" });
  await expect(dialog).toBeVisible();
  await dialog.getByRole("button", { name: "Replace" }).click();
  await expect
    .poll(() => dockerExec(["cat", `${folder}/dropped.txt`]).toString())
    .toBe("second\n");
});

test("a file browser item dropped onto a tool terminal is uploaded", async ({
  page,
}) => {
  const name = `from-lab-${process.pid}.txt`;
  const created = await page.request.put(
    `${BASE_URL}api/contents/${name}?token=${TOKEN}`,
    {
      data: { type: "file", format: "text", content: "from the file browser" },
    },
  );
  expect(created.ok()).toBe(true);
  const terminal = await openToolTerminal(page, "files-browser");
  await typeLine(page, terminal, "cd /tmp && echo AT-$((2+2))");
  await waitForLine(terminal, /^AT-4$/);
  await page.locator("#jp-left-stack").waitFor({ state: "attached" });
  const item = page.locator(".jp-DirListing-item", { hasText: name });
  if (!(await item.isVisible())) {
    await page.keyboard.press("Control+Shift+F");
  }
  await expect(item).toBeVisible();
  const from = (await item.boundingBox())!;
  const to = (await terminal.boundingBox())!;
  await page.mouse.move(from.x + 20, from.y + from.height / 2);
  await page.mouse.down();
  await page.mouse.move(from.x + 40, from.y + from.height / 2 + 10, {
    steps: 5,
  });
  await page.mouse.move(to.x + to.width / 2, to.y + to.height / 2, {
    steps: 10,
  });
  await page.mouse.up();
  await expect(
    page.locator(".jp-toast-message", {
      hasText: `Uploaded ${name} to /tmp/${name}`,
    }),
  ).toBeVisible();
  expect(dockerExec(["cat", `/tmp/${name}`]).toString()).toBe(
    "from the file browser",
  );
});

test("Download from Tool Instance… downloads a file of the terminal's folder", async ({
  page,
}) => {
  const folder = `/tmp/download-${process.pid}`;
  dockerExec([
    "sh",
    "-c",
    `mkdir -p ${folder} && printf 'made in the container\\n' > ${folder}/report.txt`,
  ]);
  const terminal = await openToolTerminal(page, "files-download");
  await typeLine(page, terminal, `cd ${folder} && echo DL-$((3+3))`);
  await waitForLine(terminal, /^DL-6$/);
  await terminal.click({ button: "right" });
  await page
    .locator(".lm-Menu-itemLabel", { hasText: "Download from Tool Instance…" })
    .click();
  const dialog = page.locator(".jp-Dialog");
  await expect(dialog).toContainText(
    "relative to the terminal’s current folder",
  );
  await dialog.locator("input").fill("report.txt");
  // What the page hands to the browser's download: the Blob and its name.
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
  const answered = page.waitForResponse(
    (response) =>
      response.url().includes("/files?") &&
      response.request().method() === "GET",
  );
  await dialog.getByRole("button", { name: "Ok" }).click();
  const response = await answered;
  expect(response.status()).toBe(200);
  expect(response.headers()["content-disposition"]).toBe(
    'attachment; filename="report.txt"',
  );
  await expect
    .poll(() =>
      page.evaluate(async () => {
        const saved = (
          window as unknown as { saved: { name: string; blob: Blob }[] }
        ).saved;
        return saved.length === 0
          ? null
          : [saved[0].name, await saved[0].blob.text()];
      }),
    )
    .toEqual(["report.txt", "made in the container\n"]);
  // A path that is not there: the user reads why.
  await terminal.click({ button: "right" });
  await page
    .locator(".lm-Menu-itemLabel", { hasText: "Download from Tool Instance…" })
    .click();
  await page.locator(".jp-Dialog input").fill("/no/such/file");
  await page.locator(".jp-Dialog").getByRole("button", { name: "Ok" }).click();
  await expect(page.locator(".jp-Dialog")).toContainText(
    "/no/such/file does not exist.",
  );
});
