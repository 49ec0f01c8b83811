// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import { terminalIcon } from '@jupyterlab/ui-components';

import { sanitizeSvg, toolIcon } from '../icons';

const SVG = '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16">';

describe('sanitizeSvg', () => {
  it('keeps a plain icon', () => {
    const clean = sanitizeSvg(`${SVG}<path d="M0 0h16v16z" fill="red"/></svg>`);
    expect(clean).toContain('<path');
    expect(clean).toContain('fill="red"');
  });

  it('drops scripts, foreign objects, images and handlers', () => {
    const clean = sanitizeSvg(
      `${SVG}<script>alert(1)</script>` +
        '<foreignObject><div>x</div></foreignObject>' +
        '<image href="http://evil.example/x.png"/>' +
        '<a href="javascript:alert(1)"><path d="M0 0"/></a>' +
        '<path d="M1 1" onclick="alert(1)" onload="alert(2)"/>' +
        '<rect width="1" height="1" fill="url(http://evil.example/#x)"/>' +
        '<circle r="1" fill="url(#grad)"/>' +
        '<use href="#shape"/><use href="http://evil.example/s.svg#x"/>' +
        '</svg>'
    )!;
    expect(clean).not.toMatch(/script|foreignObject|image|onclick|onload/i);
    expect(clean).not.toContain('evil.example');
    expect(clean).not.toContain('javascript');
    expect(clean).toContain('url(#grad)');
    expect(clean).toContain('href="#shape"');
    expect(clean).toContain('d="M1 1"');
  });

  it('refuses what is not an SVG', () => {
    expect(sanitizeSvg(null)).toBeNull();
    expect(sanitizeSvg(undefined)).toBeNull();
    expect(sanitizeSvg('')).toBeNull();
    expect(sanitizeSvg('<html><body/></html>')).toBeNull();
    expect(sanitizeSvg('<svg><path></svg>')).toBeNull();
    expect(sanitizeSvg(`${SVG}${' '.repeat(200_000)}</svg>`)).toBeNull();
  });
});

describe('toolIcon', () => {
  it('falls back to the terminal icon', () => {
    expect(toolIcon('pg', null)).toBe(terminalIcon);
    expect(toolIcon('pg', '<not svg')).toBe(terminalIcon);
  });

  it('creates one icon per tool type and SVG', () => {
    const svg = `${SVG}<circle r="4"/></svg>`;
    const first = toolIcon('pg', svg);
    expect(first).not.toBe(terminalIcon);
    expect(toolIcon('pg', svg)).toBe(first);
    expect(toolIcon('spark', svg)).not.toBe(first);
  });
});
