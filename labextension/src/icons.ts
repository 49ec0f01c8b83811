// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import { LabIcon, terminalIcon } from '@jupyterlab/ui-components';

import { EXTENSION_ID } from './tokens';

/**
 * The extension's own icon (a shell prompt in a container): the launcher's
 * "Tool Terminals" section shows it, not one of its tool types' icons.
 */
export const toolTerminalsIcon = new LabIcon({
  name: `${EXTENSION_ID}:tool-terminals`,
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24">' +
    '<g class="jp-icon3" fill="#616161">' +
    '<path d="M4 3h16a2 2 0 0 1 2 2v14a2 2 0 0 1-2 2H4a2 2 0 0 1-2-2V5a2 2 0 0 1 2-2zm0 4v12h16V7z"/>' +
    '<path d="M6.3 9.2 7.4 8.1 11.3 12l-3.9 3.9-1.1-1.1 2.8-2.8z"/>' +
    '<rect x="12" y="15" width="6" height="1.6"/>' +
    '</g></svg>'
});

/**
 * The SVG elements a launcher icon may contain. Anything else (scripts,
 * foreign objects, images, links, animations) is dropped.
 */
const ALLOWED_ELEMENTS = new Set([
  'svg',
  'g',
  'defs',
  'title',
  'desc',
  'path',
  'rect',
  'circle',
  'ellipse',
  'line',
  'polyline',
  'polygon',
  'text',
  'tspan',
  'lineargradient',
  'radialgradient',
  'stop',
  'clippath',
  'mask',
  'symbol',
  'use'
]);

/**
 * The most characters of SVG accepted for one icon.
 */
const MAX_SVG_LENGTH = 100_000;

/**
 * Sanitize an operator-configured SVG icon before it is put in the DOM.
 *
 * Only shape elements are kept; event handler attributes and any reference to something outside the document (`href` not starting with `#`,
 * `url(...)` not pointing to `#...`) are removed.
 *
 * @param svg - The SVG text from the server.
 * @returns The sanitized SVG text, or `null` if it is not a usable SVG.
 */
export function sanitizeSvg(svg: string | null | undefined): string | null {
  if (
    typeof svg !== 'string' ||
    svg.length === 0 ||
    svg.length > MAX_SVG_LENGTH
  ) {
    return null;
  }
  const doc = new DOMParser().parseFromString(svg, 'image/svg+xml');
  const root = doc.documentElement;
  if (
    root === null ||
    root.nodeName.toLowerCase() !== 'svg' ||
    doc.getElementsByTagName('parsererror').length > 0
  ) {
    return null;
  }
  Private.clean(root);
  return new XMLSerializer().serializeToString(root);
}

/**
 * Create (or reuse) the launcher and tab icon of a tool type.
 *
 * @param tool - The tool type name.
 * @param svg - The tool type's SVG from the server, if any.
 * @returns The tool type's icon, or JupyterLab's terminal icon.
 */
export function toolIcon(
  tool: string,
  svg: string | null | undefined
): LabIcon {
  const clean = sanitizeSvg(svg);
  if (clean === null) {
    return terminalIcon;
  }
  const key = `${tool}\n${clean}`;
  let icon = Private.icons.get(key);
  if (icon === undefined) {
    icon = new LabIcon({
      name: `${EXTENSION_ID}:tool-${Private.icons.size}-${tool}`,
      svgstr: clean
    });
    Private.icons.set(key, icon);
  }
  return icon;
}

/**
 * Module internals.
 */
namespace Private {
  /**
   * The icons created so far, by tool type and SVG.
   */
  export const icons = new Map<string, LabIcon>();

  /**
   * Remove what is not allowed from an element and its descendants.
   */
  export function clean(element: Element): void {
    for (const attribute of Array.from(element.attributes)) {
      const name = attribute.name.toLowerCase();
      const value = attribute.value.trim().toLowerCase();
      const local = name.includes(':') ? name.split(':').pop()! : name;
      if (
        name.startsWith('on') ||
        (local === 'href' && !value.startsWith('#')) ||
        (value.includes('url(') && !/^url\(\s*['"]?#/.test(value))
      ) {
        element.removeAttribute(attribute.name);
      }
    }
    for (const child of Array.from(element.children)) {
      if (!ALLOWED_ELEMENTS.has(child.nodeName.toLowerCase())) {
        child.remove();
      } else {
        clean(child);
      }
    }
  }
}
