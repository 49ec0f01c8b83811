// Renders byte streams in xterm.js headless (the browser's terminal without a browser) and prints
// what each terminal shows, cell by cell, as JSON: the reference the screen model is compared with.
// Input (stdin): a JSON list of {rows, cols, steps: [["write", text] | ["resize", rows, cols]]}.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { Terminal } = require('@xterm/headless');

function cell(line, x, buffer) {
  const c = line.getCell(x, buffer.getNullCell());
  return [
    c.getChars(),
    c.getWidth(),
    c.isFgDefault() ? 'default' : c.isFgRGB() ? `rgb:${c.getFgColor()}` : `p:${c.getFgColor()}`,
    c.isBgDefault() ? 'default' : c.isBgRGB() ? `rgb:${c.getBgColor()}` : `p:${c.getBgColor()}`,
    [c.isBold(), c.isItalic(), c.isUnderline(), c.isBlink(), c.isInverse(), c.isStrikethrough(),
     c.isDim(), c.isInvisible()].map((on) => (on ? 1 : 0)).join(''),
  ];
}

function state(term, title) {
  const buffer = term.buffer.active;
  const lines = [];
  for (let y = 0; y < buffer.length; y++) {
    const line = buffer.getLine(y);
    const cells = [];
    for (let x = 0; x < term.cols; x++) cells.push(cell(line, x, buffer));
    lines.push({ text: line.translateToString(true), wrapped: line.isWrapped, cells });
  }
  return {
    rows: term.rows,
    cols: term.cols,
    type: buffer.type,
    baseY: buffer.baseY,
    cursor: [buffer.cursorX, buffer.cursorY],
    lines,
    normalLength: term.buffer.normal.length,
    modes: term.modes,
    title,
  };
}

async function render(spec) {
  const term = new Terminal({ rows: spec.rows, cols: spec.cols, scrollback: 1000, allowProposedApi: true });
  let title = '';
  term.onTitleChange((text) => { title = text; });
  for (const step of spec.steps) {
    if (step[0] === 'write') await new Promise((done) => term.write(step[1], done));
    else term.resize(step[2], step[1]);
  }
  const result = state(term, title);
  term.dispose();
  return result;
}

let input = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => { input += chunk; });
process.stdin.on('end', async () => {
  const results = [];
  for (const spec of JSON.parse(input)) results.push(await render(spec));
  process.stdout.write(JSON.stringify(results));
});
