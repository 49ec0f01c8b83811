// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import { MAX_OSC52_PAYLOAD, Osc52Scanner } from '../osc52';

const b64 = (text: string): string =>
  btoa(String.fromCharCode(...new TextEncoder().encode(text)));

describe('Osc52Scanner', () => {
  it('finds a sequence ended by BEL or by ST', () => {
    const scanner = new Osc52Scanner();
    expect(
      scanner.feed(
        `a\x1b]52;c;${b64('hello')}\x07b\x1b]52;;${b64('wörld')}\x1b\\`
      )
    ).toEqual(['hello', 'wörld']);
  });

  it('joins a sequence split between chunks, anywhere', () => {
    const whole = `x\x1b]52;c;${b64('split text')}\x1b\\y`;
    for (let cut = 1; cut < whole.length; cut++) {
      const scanner = new Osc52Scanner();
      const found = [
        ...scanner.feed(whole.slice(0, cut)),
        ...scanner.feed(whole.slice(cut))
      ];
      expect(found).toEqual(['split text']);
    }
  });

  it('never answers a query and drops malformed payloads', () => {
    const scanner = new Osc52Scanner();
    expect(scanner.feed('\x1b]52;c;?\x07\x1b]52;c;not base64!\x07')).toEqual(
      []
    );
  });

  it('drops an oversized sequence and goes on', () => {
    const scanner = new Osc52Scanner();
    const big = 'A'.repeat(MAX_OSC52_PAYLOAD + 4);
    expect(scanner.feed(`\x1b]52;c;${big.slice(0, 60_000)}`)).toEqual([]);
    expect(scanner.feed(`${big.slice(60_000)}\x07`)).toEqual([]);
    expect(scanner.feed(`\x1b]52;c;${b64('after')}\x07`)).toEqual(['after']);
  });
});
