// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import type { ILauncher } from '@jupyterlab/launcher';
import type { CommandRegistry } from '@lumino/commands';
import type { IDisposable } from '@lumino/disposable';
import { DisposableSet } from '@lumino/disposable';

import { toolTerminalsIcon } from './icons';
import type { ToolInstances } from './instances';
import { CommandIDs } from './tokens';

/**
 * The rank of the "Tool Terminals" launcher section: JupyterLab's own
 * Terminal tile is in "Other" (rank 100), and a section of equal rank
 * follows it by name, so the tool terminals come right after it.
 */
export const CATEGORY_RANK = 100;

/**
 * The class of the launcher section's own icon (and of the card that
 * carries it, hidden by the extension's style).
 */
export const SECTION_ICON_CLASS = 'jp-ToolTerminal-sectionIcon';

/**
 * The command of the card that carries the section's icon.
 */
const SECTION_COMMAND = 'tool-terminal:launcher-section';

/**
 * Give the launcher's "Tool Terminals" section the extension's icon.
 *
 * JupyterLab's launcher heads a section with the icon of its first card, and
 * has no option for a section's own: so the section's first card (rank -1)
 * is one that shows the extension's icon, hidden by the style (a card with
 * that icon class is not displayed), rather than the first instance's tool
 * type icon.
 *
 * @param commands - The command registry (the card's command).
 * @param launcher - The launcher.
 * @param category - The section name.
 * @returns What removes the card and its command.
 */
export function addSectionIcon(
  commands: CommandRegistry,
  launcher: LauncherTiles.ILauncherLike,
  category: string
): IDisposable {
  return DisposableSet.from([
    commands.addCommand(SECTION_COMMAND, {
      label: category,
      icon: toolTerminalsIcon.bindprops({ className: SECTION_ICON_CLASS }),
      isVisible: () => false,
      execute: () => undefined,
      describedBy: { args: { type: 'object', properties: {} } }
    }),
    launcher.add({
      command: SECTION_COMMAND,
      category,
      categoryRank: CATEGORY_RANK,
      rank: -1
    })
  ]);
}

/**
 * The launcher tiles of the tool instances: one tile per instance, or, when
 * the instances cannot be listed, one tile that says why (and retries when
 * clicked).
 */
export class LauncherTiles implements IDisposable {
  /**
   * Keep the launcher's tiles in step with an instance model.
   *
   * @param options - The launcher, the instance model and the section name.
   */
  constructor(options: LauncherTiles.IOptions) {
    this._launcher = options.launcher;
    this._instances = options.instances;
    this._category = options.category;
    this._instances.changed.connect(this.update, this);
    this.update();
  }

  /**
   * The keys of the tiles shown, in order (instance ids, or `''` for the
   * tile that says why there are none: the instances cannot be listed, or
   * the server says why it has none to show).
   */
  get keys(): string[] {
    return Array.from(this._tiles.keys());
  }

  /**
   * Whether the tiles are disposed.
   */
  get isDisposed(): boolean {
    return this._isDisposed;
  }

  /**
   * Add, replace and remove tiles to match the instance model. A tile is
   * replaced only when what it shows changed (the launcher re-renders its
   * labels and icons from the command on every render).
   */
  update(): void {
    if (this._isDisposed) {
      return;
    }
    // Each tile with what it shows: the launcher renders a tile's label,
    // icon and tooltip only when its items change, so a tile whose instance
    // changed state (or whose reason changed) is replaced.
    const wanted = new Map<
      string,
      { item: ILauncher.IItemOptions; shows: unknown }
    >();
    const { error, list, notes } = this._instances;
    if (error !== null || (list.length === 0 && notes.length > 0)) {
      wanted.set(STATUS_KEY, {
        item: {
          command: CommandIDs.refresh,
          args: { launcher: true },
          category: this._category,
          categoryRank: CATEGORY_RANK,
          rank: 0
        },
        shows: [error, notes]
      });
    } else {
      list.forEach((instance, rank) => {
        wanted.set(instance.id, {
          item: {
            command: CommandIDs.open,
            args: { instance: instance.id },
            category: this._category,
            categoryRank: CATEGORY_RANK,
            rank
          },
          shows: instance
        });
      });
    }
    for (const [key, known] of Array.from(this._tiles.entries())) {
      const tile = wanted.get(key);
      if (tile === undefined || JSON.stringify(tile) !== known.item) {
        known.tile.dispose();
        this._tiles.delete(key);
      }
    }
    for (const [key, tile] of wanted) {
      if (!this._tiles.has(key)) {
        this._tiles.set(key, {
          item: JSON.stringify(tile),
          tile: this._launcher.add(tile.item)
        });
      }
    }
  }

  /**
   * Remove every tile.
   */
  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._instances.changed.disconnect(this.update, this);
    for (const known of this._tiles.values()) {
      known.tile.dispose();
    }
    this._tiles.clear();
  }

  private _launcher: LauncherTiles.ILauncherLike;
  private _instances: ToolInstances;
  private _category: string;
  private _tiles = new Map<string, { item: string; tile: IDisposable }>();
  private _isDisposed = false;
}

/**
 * The namespace for `LauncherTiles` statics.
 */
export namespace LauncherTiles {
  /**
   * The part of JupyterLab's launcher the tiles use.
   */
  export interface ILauncherLike {
    add(options: ILauncher.IItemOptions): IDisposable;
  }

  /**
   * The options of the tiles.
   */
  export interface IOptions {
    /**
     * The launcher.
     */
    launcher: ILauncherLike;

    /**
     * The instance model.
     */
    instances: ToolInstances;

    /**
     * The launcher section (translated "Tool Terminals").
     */
    category: string;
  }
}

/**
 * The key of the tile that says why no instance is listed.
 */
const STATUS_KEY = '';
