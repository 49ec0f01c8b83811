// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * Find in a tool terminal (Ctrl+F while it has the focus, Edit > Find…):
 * JupyterLab's search bar over the scrollback the page holds, through the
 * search addon JupyterLab's terminal widget loads into xterm.js.
 */

import { MainAreaWidget } from '@jupyterlab/apputils';
import type { ISearchProvider } from '@jupyterlab/documentsearch';
import { SearchProvider } from '@jupyterlab/documentsearch';
import type { Terminal } from '@jupyterlab/terminal';
import type { Widget } from '@lumino/widgets';

import { ToolTerminalPanel } from './panel';

/**
 * A tool terminal's main area widget, as search sees it.
 */
export type ToolTerminalWidget = MainAreaWidget<ToolTerminalPanel>;

/**
 * The search provider of tool terminals (read-only: a terminal's text is
 * the program's, not the user's to replace).
 */
export class ToolTerminalSearchProvider extends SearchProvider<ToolTerminalWidget> {
  /**
   * Make a provider for a tool terminal.
   *
   * @param widget - The tool terminal's main area widget.
   */
  constructor(widget: ToolTerminalWidget) {
    super(widget);
  }

  /**
   * Whether a widget is a tool terminal.
   */
  static isApplicable(domain: Widget): domain is ToolTerminalWidget {
    return (
      domain instanceof MainAreaWidget &&
      domain.content instanceof ToolTerminalPanel
    );
  }

  /**
   * Make a provider for a tool terminal (the registry's factory, called
   * with widgets {@link isApplicable} accepted).
   */
  static createNew(widget: Widget): ISearchProvider {
    return new ToolTerminalSearchProvider(widget as ToolTerminalWidget);
  }

  /**
   * A terminal's text cannot be replaced.
   */
  readonly isReadOnly = true;

  /**
   * The index of the highlighted match, if any.
   */
  get currentMatchIndex(): number | null {
    return this._current;
  }

  /**
   * The number of matches, if known.
   */
  get matchesCount(): number | null {
    return this._count;
  }

  /**
   * Search for a query, from the viewport on.
   */
  async startQuery(query: RegExp): Promise<void> {
    this._query = query;
    this._follow();
    this._find(true);
  }

  /**
   * Highlight the next match.
   */
  async highlightNext(): Promise<undefined> {
    this._find(true);
    return undefined;
  }

  /**
   * Highlight the previous match.
   */
  async highlightPrevious(): Promise<undefined> {
    this._find(false);
    return undefined;
  }

  /**
   * Remove the highlights.
   */
  async clearHighlight(): Promise<void> {
    this._clear();
  }

  /**
   * End the search.
   */
  async endQuery(): Promise<void> {
    this._clear();
  }

  /**
   * Nothing to replace in a terminal.
   */
  async replaceCurrentMatch(): Promise<boolean> {
    return false;
  }

  /**
   * Nothing to replace in a terminal.
   */
  async replaceAllMatches(): Promise<boolean> {
    return false;
  }

  /**
   * Stop following the terminal's search results.
   */
  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._results?.dispose();
    super.dispose();
  }

  /**
   * The terminal widget, once the panel has a session.
   */
  private get _terminal(): Terminal | null {
    return this.widget.content.terminal;
  }

  /**
   * Follow the search addon's result counts (once per terminal).
   */
  private _follow(): void {
    const terminal = this._terminal;
    if (terminal === null || this._results !== null) {
      return;
    }
    this._results = terminal.searchAddon.onDidChangeResults(
      ({ resultIndex, resultCount }) => {
        this._count = resultCount > 0 ? resultCount : null;
        this._current = resultCount > 0 ? resultIndex : null;
        this._stateChanged.emit();
      }
    );
  }

  /**
   * Find the next or previous match of the query.
   */
  private _find(forward: boolean): void {
    const terminal = this._terminal;
    if (terminal === null || this._query === null) {
      return;
    }
    const { source, flags } = this._query;
    const options = {
      regex: true,
      caseSensitive: !flags.includes('i'),
      decorations: Private.decorations(terminal)
    };
    if (forward) {
      terminal.searchAddon.findNext(source, options);
    } else {
      terminal.searchAddon.findPrevious(source, options);
    }
  }

  /**
   * Forget the query and its highlights.
   */
  private _clear(): void {
    this._query = null;
    this._count = null;
    this._current = null;
    this._terminal?.searchAddon.clearDecorations();
  }

  private _query: RegExp | null = null;
  private _count: number | null = null;
  private _current: number | null = null;
  private _results: { dispose(): void } | null = null;
}

/**
 * Module internals.
 */
namespace Private {
  /**
   * The match colours of a terminal's theme, as the search addon wants them
   * (`#rrggbb`, translucent colours laid over the background).
   */
  export function decorations(terminal: Terminal): {
    matchBackground: string;
    activeMatchBackground: string;
    matchOverviewRuler: string;
    activeMatchColorOverviewRuler: string;
  } {
    const theme = terminal.getXTermTheme();
    const background = rgb(theme.background) ?? [255, 255, 255, 1];
    return {
      matchBackground: hex(theme.selectionBackground, background),
      activeMatchBackground: hex(theme.activeMatchBackground, background),
      matchOverviewRuler: '',
      activeMatchColorOverviewRuler: ''
    };
  }

  /**
   * A CSS colour (`#rgb`, `#rrggbb`, `rgb()`, `rgba()`) as `#rrggbb` over a
   * background; grey for anything else.
   */
  function hex(color: string, background: number[]): string {
    const parsed = rgb(color);
    if (parsed === null) {
      return '#888888';
    }
    const alpha = parsed[3];
    const mixed = [0, 1, 2].map(i =>
      Math.round(parsed[i] * alpha + background[i] * (1 - alpha))
    );
    return `#${mixed.map(v => v.toString(16).padStart(2, '0')).join('')}`;
  }

  /**
   * The red, green, blue and alpha of a CSS colour, or `null`.
   */
  function rgb(color: string): number[] | null {
    const value = color.trim();
    let match = /^#([0-9a-f]{3}|[0-9a-f]{6})$/i.exec(value);
    if (match) {
      const digits =
        match[1].length === 3 ? match[1].replace(/./g, c => c + c) : match[1];
      return [0, 2, 4].map(i => parseInt(digits.slice(i, i + 2), 16)).concat(1);
    }
    match = /^rgba?\(([^)]*)\)$/i.exec(value);
    if (match) {
      const parts = match[1].split(',').map(part => parseFloat(part));
      if (parts.length >= 3 && parts.every(part => !isNaN(part))) {
        return [parts[0], parts[1], parts[2], parts[3] ?? 1];
      }
    }
    return null;
  }
}
