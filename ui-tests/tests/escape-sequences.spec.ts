// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * Real-browser end-to-end test: terminal escape sequences written by the
 * container must not make the browser do anything dangerous (section H of
 * the security research, rows 42-46).
 *
 * What reaches the program's stdin is measured in the container: a small
 * recorder script (installed with `docker exec`) puts the terminal in raw
 * mode without echo, prints the sequences of a case, then copies every byte
 * the terminal sends into a file until the test stops it. The output of a
 * case ends with a cursor position request (`ESC [6n`), which xterm.js
 * always answers: xterm answers the sequences of a chunk in order, so once
 * that reply is in the file, every reply to the sequences before it is too,
 * and the test stops the recorder (by its pid) without waiting for a time
 * window. The reply also shows that the recorder does capture what the
 * terminal sends. A reply made asynchronously (one carrying the clipboard,
 * read with a promise) has no such order: the page's clipboard calls are
 * counted instead.
 */
import type { BrowserContext, Locator, Page } from "@playwright/test";
import { expect, test } from "@playwright/test";

import {
  dockerExec,
  openToolTerminal,
  screenLines,
  shells,
  tabMenu,
  DISPLAY_NAME,
  terminalTabs,
  typeLine,
  waitForLine,
} from "./helpers";

/**
 * The directory of the recorder and of each case's files in the container.
 */
const DIR = "/tmp/e2e-escapes";

/**
 * The recorder: `sh rec NAME` prints NAME.out, then records the terminal's
 * input in NAME.in until the test kills it through NAME.pid.
 */
const RECORDER = `d=${DIR}
saved=$(stty -g)
# Raw and unechoed before the output: a reply that arrives before cat starts
# waits in the terminal's input queue, unechoed and not line-edited.
stty raw -echo
cat "$d/$1.out"
printf 'recording %s\\r\\n' "$1"
# At most 20 s, so that a failed test leaves nothing running; the shell's
# "Terminated" notice goes to /dev/null.
{ timeout 20 sh -c 'echo $$ > "$1"; exec cat' rec "$d/$1.pid" > "$d/$1.in"; } 2>/dev/null
stty "$saved"
# No bracketed paste mode left behind for the next case.
printf '\\033[?2004l'
echo "recorded $1"
`;

/**
 * The cursor position request that ends the output of a case.
 */
const FENCE = "\x1b[6n";

/**
 * xterm's reply to {@link FENCE}.
 */
const FENCE_REPLY = /\x1b\[\d+;\d+R/;

/**
 * Bytes as a readable JSON string (for assertion messages).
 */
function show(bytes: Buffer | string): string {
  return JSON.stringify(
    typeof bytes === "string" ? bytes : bytes.toString("latin1"),
  );
}

/**
 * Write a file in the container.
 */
function putFile(path: string, content: Buffer | string): void {
  dockerExec(["sh", "-c", 'cat > "$1"', "put", path], content);
}

/**
 * The bytes of a file in the container (none if it does not exist yet).
 */
function readFile(path: string): Buffer {
  return dockerExec(["sh", "-c", 'cat "$1" 2>/dev/null || true', "get", path]);
}

let context: BrowserContext;
let page: Page;
let terminal: Locator;

/**
 * What the page did that it must not do on its own: dialogs (xterm.js asks
 * for confirmation before opening a link), new pages (popups, tabs) and
 * requests for the `x` of `<img src=x>`.
 */
const seen = {
  dialogs: [] as string[],
  pages: [] as string[],
  imageRequests: [] as string[],
};

/**
 * Run one case through the recorder.
 *
 * @param name - The case name (file names in the container).
 * @param output - What the "program" prints before recording.
 * @param until - Whether the recorded input is complete.
 * @param during - What the user does while the recorder runs.
 * @returns The bytes the terminal sent to the program.
 */
async function record(
  name: string,
  output: string,
  until: (recorded: Buffer) => boolean = (bytes) =>
    FENCE_REPLY.test(bytes.toString("latin1")),
  during?: () => Promise<void>,
): Promise<Buffer> {
  putFile(`${DIR}/${name}.out`, output);
  await typeLine(page, terminal, `sh ${DIR}/rec ${name}`);
  // The marker comes after the output: xterm has parsed all of it.
  await waitForLine(terminal, new RegExp(`^recording ${name}$`));
  if (during) {
    await during();
  }
  await expect
    .poll(() => until(readFile(`${DIR}/${name}.in`)), {
      message: `the recorded input of ${name} is complete`,
      intervals: [50, 100, 250],
    })
    .toBe(true);
  dockerExec(["sh", "-c", 'kill "$(cat "$1")"', "stop", `${DIR}/${name}.pid`]);
  await waitForLine(terminal, new RegExp(`^recorded ${name}$`));
  return readFile(`${DIR}/${name}.in`);
}

/**
 * The recorded input without the fence's reply, which it must hold. What
 * came after the reply is kept: a reply made asynchronously (a clipboard
 * read) may come after the fence's.
 */
function withoutFence(recorded: Buffer): string {
  const text = recorded.toString("latin1");
  expect(text, show(recorded)).toMatch(FENCE_REPLY);
  return text.replace(FENCE_REPLY, "");
}

/**
 * A global of the page (set by a payload if it ever ran).
 */
async function pageGlobal(name: string): Promise<unknown> {
  return page.evaluate(
    (key) => (window as unknown as Record<string, unknown>)[key],
    name,
  );
}

// The cases share one JupyterLab page and one terminal session: opening
// JupyterLab is most of a case's cost.
test.describe.configure({ mode: "serial" });

test.beforeAll(async ({ browser }, testInfo) => {
  dockerExec(["sh", "-c", `mkdir -p ${DIR} && chmod 1777 ${DIR}`]);
  putFile(`${DIR}/rec`, RECORDER);
  context = await browser.newContext({
    viewport: testInfo.project.use.viewport,
    permissions: ["clipboard-read", "clipboard-write"],
  });
  // Count every use of the clipboard APIs by the page.
  await context.addInitScript(() => {
    const calls: string[] = [];
    (window as unknown as { __clipboardCalls: string[] }).__clipboardCalls =
      calls;
    const proto = Clipboard.prototype as unknown as Record<
      string,
      (...args: unknown[]) => unknown
    >;
    for (const method of ["read", "readText", "write", "writeText"]) {
      const original = proto[method];
      proto[method] = function (this: Clipboard, ...args: unknown[]) {
        calls.push(method);
        return original.apply(this, args);
      };
    }
    const execCommand = Document.prototype.execCommand;
    Document.prototype.execCommand = function (
      this: Document,
      command: string,
      ...rest: unknown[]
    ) {
      calls.push(`execCommand:${command}`);
      return execCommand.call(this, command, ...(rest as [boolean, string]));
    };
  });
  context.on("page", (other) => seen.pages.push(other.url()));
  page = await context.newPage();
  page.on("dialog", (dialog) => {
    seen.dialogs.push(dialog.message());
    void dialog.dismiss();
  });
  page.on("request", (request) => {
    if (new URL(request.url()).pathname.endsWith("/x")) {
      seen.imageRequests.push(request.url());
    }
  });
  // A workspace of its own (see openLab): the other specs expect the
  // launcher, not this terminal.
  terminal = await openToolTerminal(page, "e2e-escapes");
  // Only pages opened from now on count (not the one opened above).
  seen.pages.length = 0;
});

// The configuration's screenshot on failure covers only Playwright's own
// page fixture, not this shared page.
test.afterEach(async ({}, testInfo) => {
  if (testInfo.status !== testInfo.expectedStatus && page) {
    await testInfo.attach("screenshot", {
      body: await page.screenshot(),
      contentType: "image/png",
    });
  }
});

test.afterAll(async () => {
  // Leave no session behind for the next spec, which counts shells.
  if (page) {
    await tabMenu(page, "Shut Down Tool Terminal Session");
    await expect(terminalTabs(page)).toHaveCount(0);
    await expect.poll(() => shells(), { timeout: 30_000 }).toEqual([]);
  }
  await context?.close();
});

test("42: OSC 52 never reads the clipboard; a set writes it, in the user's own terminal", async () => {
  const known = `E2E-CLIPBOARD-${Date.now()}`;
  await page.evaluate((text) => navigator.clipboard.writeText(text), known);
  // The instrumentation counts the page's clipboard calls (this one too).
  expect(await pageGlobal("__clipboardCalls")).toContain("writeText");
  await page.evaluate(() => {
    (
      window as unknown as { __clipboardCalls: string[] }
    ).__clipboardCalls.length = 0;
  });

  const recorded = await record(
    "osc52",
    // Query (a reply would carry the clipboard to the program), then set
    // ("echo pwned\n"), in the clipboard and the primary selection, with
    // both string terminators.
    "\x1b]52;c;?\x07" +
      "\x1b]52;c;ZWNobyBwd25lZAo=\x07" +
      "\x1b]52;p;?\x1b\\" +
      "\x1b]52;;ZWNobyBwd25lZAo=\x1b\\" +
      FENCE,
  );
  // Nothing but the fence's reply reached stdin: no query is answered.
  expect(withoutFence(recorded), show(recorded)).toBe("");
  // The page never read the clipboard; the sets wrote it (the osc52Copy
  // setting, on by default, lets programs of the user's own terminals copy).
  const calls = (await pageGlobal("__clipboardCalls")) as string[];
  expect(calls).not.toContain("readText");
  expect(calls.length).toBeGreaterThan(0);
  expect(
    await page.evaluate(() => navigator.clipboard.readText()),
    "the clipboard holds what the program copied",
  ).toBe("echo pwned\n");
});

test("43: DECRQSS and XTGETTCAP replies carry no attacker bytes", async () => {
  const recorded = await record(
    "dcs",
    "\x1bP$q\nrm -rf ~\n\x1b\\" +
      "\x1bP+q\nrm -rf ~\n\x1b\\" +
      // XTGETTCAP names are hex: this one is "rm -rf ~".
      "\x1bP+q726d202d7266207e\x1b\\" +
      // A request xterm answers: DCS replies do reach stdin.
      "\x1bP$qm\x1b\\" +
      FENCE,
  );
  const replies = withoutFence(recorded);
  expect(replies, show(recorded)).toContain("\x1bP1$r0m\x1b\\");
  expect(replies, show(recorded)).not.toMatch(/rm|~|726d|[\r\n]/);
  // Only well-formed DECRQSS replies (fixed text, no data echoed).
  expect(replies, show(recorded)).toMatch(
    /^(\x1bP[01]\$r[0-9;" a-z]*\x1b\\)+$/,
  );
});

test("44: a title with HTML stays text, and no window report is sent", async () => {
  const payload = '<img src=x onerror="window.__pwned=1">';
  const recorded = await record(
    "title",
    `\x1b]0;${payload}\x07` +
      `\x1b]2;${payload}\x1b\\` +
      // Report the title, the icon label, the text area in pixels and in
      // characters, the screen in characters.
      "\x1b[21t\x1b[20t\x1b[14t\x1b[18t\x1b[19t" +
      FENCE,
  );
  expect(withoutFence(recorded), show(recorded)).toBe("");
  expect(await pageGlobal("__pwned")).toBeUndefined();
  await expect(page.locator('img[src="x"]')).toHaveCount(0);
  expect(seen.imageRequests).toEqual([]);
  // The tab keeps the instance's title (its display name).
  await expect(terminalTabs(page)).toHaveText(DISPLAY_NAME);

  // The payload does run when parsed as HTML in this page: the checks above
  // would see it.
  await page.evaluate((html) => {
    document.createElement("div").innerHTML = html;
  }, payload);
  await expect.poll(() => pageGlobal("__pwned")).toBe(1);
  await expect.poll(() => seen.imageRequests.length).toBeGreaterThan(0);
  await page.evaluate(() => {
    delete (window as unknown as Record<string, unknown>).__pwned;
  });
});

test("45: OSC 8 links to javascript:, file: and data: do nothing", async () => {
  const link = (target: string, label: string) =>
    `\x1b]8;;${target}\x1b\\${label}\x1b]8;;\x1b\\\n`;
  const links = [
    ["javascript:window.__pwned=45", "JAVASCRIPT-LINK-XXXXXXXXXXXX"],
    ["file:///etc/passwd", "FILE-LINK-XXXXXXXXXXXXXXXXXX"],
    [
      "data:text/html,<script>opener.__pwned=45</script>",
      "DATA-LINK-XXXXXXXXXXXXXXXXXX",
    ],
  ];
  // An https link: xterm.js asks before opening it (and the test says no),
  // which shows that hovering and clicking do reach the link.
  const control = [
    "https://example.invalid/e2e",
    "HTTPS-LINK-XXXXXXXXXXXXXXXXX",
  ];
  putFile(
    `${DIR}/links.out`,
    [...links, control].map(([target, label]) => link(target, label)).join(""),
  );
  await typeLine(page, terminal, `clear; cat ${DIR}/links.out`);
  await waitForLine(terminal, new RegExp(`^${control[1]}$`));

  const url = page.url();
  const screen = terminal.locator(".xterm-screen");
  const pointer = terminal.locator(".xterm-screen.xterm-cursor-pointer");
  // A point in a label's first cells, mid-row: from the screen's box, not
  // from the accessibility rows' (offset by the terminal's padding).
  const at = async (label: string) => {
    const lines = await screenLines(terminal);
    const row = lines.indexOf(label);
    expect(row, `${label} on the screen`).toBeGreaterThanOrEqual(0);
    const box = await screen.boundingBox();
    expect(box).not.toBeNull();
    const cellHeight = box!.height / lines.length;
    return { x: box!.x + 12, y: box!.y + (row + 0.5) * cellHeight };
  };

  const hrefPoint = await at(control[1]);
  await page.mouse.move(hrefPoint.x, hrefPoint.y);
  await expect(pointer).toHaveCount(1);
  await page.mouse.click(hrefPoint.x, hrefPoint.y);
  await expect.poll(() => seen.dialogs.length).toBe(1);
  expect(seen.dialogs[0]).toContain(control[0]);

  for (const [target, label] of links) {
    const point = await at(label);
    // xterm.js finds links on mouse moves: leaving the https link clears
    // the pointer, and none comes back over a link it does not accept.
    await page.mouse.move(hrefPoint.x, hrefPoint.y);
    await expect(pointer).toHaveCount(1);
    await page.mouse.move(point.x, point.y);
    await expect(pointer, target).toHaveCount(0);
    await page.mouse.click(point.x, point.y);
  }
  // The https link once more: any dialog the others raised came before.
  await page.mouse.click(hrefPoint.x, hrefPoint.y);
  await expect.poll(() => seen.dialogs.length).toBe(2);
  expect(seen.dialogs.every((message) => message.includes(control[0]))).toBe(
    true,
  );
  expect(seen.pages).toEqual([]);
  expect(context.pages()).toHaveLength(1);
  expect(page.url()).toBe(url);
  expect(await pageGlobal("__pwned")).toBeUndefined();
});

test("46: a bracketed paste cannot end itself early", async () => {
  const text = "foo\x1b[201~\nrm -rf ~\n";
  await page.evaluate((value) => navigator.clipboard.writeText(value), text);
  // Each paste must arrive as one bracketed paste: its own markers, the
  // text's ESC shown as U+241B, the line feeds turned into carriage returns
  // by xterm.js.
  const paste = "\x1b[200~foo\u241b[201~\rrm -rf ~\r\x1b[201~";
  const end = "#END";
  const received = () => readFile(`${DIR}/paste.in`).toString("utf-8");
  const textarea = terminal.locator(".xterm-helper-textarea");
  const recorded = await record(
    "paste",
    // The program asks for bracketed paste.
    "\x1b[?2004h",
    (bytes) => bytes.toString("utf-8").endsWith(end),
    async () => {
      // A paste event on xterm's textarea, as the browser fires on Ctrl+V
      // (headless Chromium does not paste on a synthetic Ctrl+V).
      await textarea.evaluate((node, value) => {
        const data = new DataTransfer();
        data.setData("text/plain", value);
        node.dispatchEvent(
          new ClipboardEvent("paste", {
            clipboardData: data,
            bubbles: true,
            cancelable: true,
          }),
        );
      }, text);
      await expect.poll(received).toContain("\x1b[200~");
      // With the terminal's context menu: JupyterLab's paste command.
      await terminal.locator(".xterm-screen").click({ button: "right" });
      // (JupyterLab's own terminal items are in the menu too, disabled.)
      await page
        .locator(".lm-Menu .lm-Menu-item:not(.lm-mod-disabled)")
        .filter({
          has: page.locator(".lm-Menu-itemLabel", { hasText: /^Paste$/ }),
        })
        .click();
      await expect.poll(() => received().split("\x1b[200~").length).toBe(3);
      // Typed keys end the recording (and show it records keystrokes).
      await textarea.focus();
      await page.keyboard.type(end);
    },
  );
  expect(recorded.toString("utf-8"), show(recorded)).toBe(paste + paste + end);
});
