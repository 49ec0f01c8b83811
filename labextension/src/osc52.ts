// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * OSC 52 ("set the clipboard"): a program in the terminal (tmux's and vim's
 * yank, `printf '\e]52;c;BASE64\a'`) asks the terminal to put text on the
 * clipboard. The terminal's output is scanned for it on its way to xterm.js
 * (which ignores the sequence); the panel decides whether to honour it.
 * Queries (`?`, a program asking to read the clipboard) are never answered.
 */

/**
 * The most base64 characters one OSC 52 sequence may carry (about 75 KB of
 * text): a longer one is dropped whole.
 */
export const MAX_OSC52_PAYLOAD = 100_000;

/**
 * The start of an OSC 52 sequence.
 */
const START = '\x1b]52;';

/**
 * Finds OSC 52 sequences in a terminal's output, chunk by chunk (a sequence
 * may be split between chunks), in bounded memory.
 */
export class Osc52Scanner {
  /**
   * Scan a chunk of output.
   *
   * @param chunk - Output as the terminal receives it.
   * @returns The texts the chunk's complete sequences ask to copy, in order.
   */
  feed(chunk: string): string[] {
    const texts: string[] = [];
    let text = this._carry + chunk;
    this._carry = '';
    for (;;) {
      if (!this._inside) {
        const start = text.indexOf(START);
        if (start < 0) {
          // Keep a possible start of a sequence cut at the chunk's end.
          this._carry = Private.partialStart(text);
          return texts;
        }
        this._inside = true;
        this._payload = '';
        this._dropped = false;
        text = text.slice(start + START.length);
      }
      const end = Private.terminator(text);
      if (end === null) {
        this._append(text.endsWith('\x1b') ? text.slice(0, -1) : text);
        this._carry = text.endsWith('\x1b') ? '\x1b' : '';
        return texts;
      }
      this._append(text.slice(0, end.index));
      text = text.slice(end.index + end.length);
      this._inside = false;
      if (!this._dropped) {
        const copied = Private.decode(this._payload);
        if (copied !== null) {
          texts.push(copied);
        }
      }
      this._payload = '';
    }
  }

  /**
   * Add to the current sequence's payload, dropping the sequence once it is
   * too long.
   */
  private _append(part: string): void {
    if (this._dropped) {
      return;
    }
    if (this._payload.length + part.length > MAX_OSC52_PAYLOAD + 16) {
      this._dropped = true;
      this._payload = '';
      return;
    }
    this._payload += part;
  }

  private _carry = '';
  private _inside = false;
  private _payload = '';
  private _dropped = false;
}

/**
 * Module internals.
 */
namespace Private {
  /**
   * Where an OSC ends: BEL or ST (`ESC \`).
   */
  export function terminator(
    text: string
  ): { index: number; length: number } | null {
    const bel = text.indexOf('\x07');
    const st = text.indexOf('\x1b\\');
    if (bel < 0 && st < 0) {
      return null;
    }
    if (st < 0 || (bel >= 0 && bel < st)) {
      return { index: bel, length: 1 };
    }
    return { index: st, length: 2 };
  }

  /**
   * The end of a text that may be the beginning of {@link START}.
   */
  export function partialStart(text: string): string {
    for (let n = Math.min(START.length - 1, text.length); n > 0; n--) {
      if (START.startsWith(text.slice(text.length - n))) {
        return text.slice(text.length - n);
      }
    }
    return '';
  }

  /**
   * The text a payload `Pc;Pd` asks to copy, or `null` for a query, a
   * malformed or an oversized one.
   */
  export function decode(payload: string): string | null {
    const separator = payload.indexOf(';');
    if (separator < 0) {
      return null;
    }
    const data = payload.slice(separator + 1);
    if (data === '?' || data.length > MAX_OSC52_PAYLOAD) {
      return null;
    }
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(data)) {
      return null;
    }
    try {
      const binary = atob(data);
      const bytes = Uint8Array.from(binary, c => c.charCodeAt(0));
      return new TextDecoder().decode(bytes);
    } catch {
      return null;
    }
  }
}
