// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import { ServerConnection } from '@jupyterlab/services';
import type { TranslationBundle } from '@jupyterlab/translation';
import type { IDisposable } from '@lumino/disposable';
import { Poll } from '@lumino/polling';
import type { ISignal } from '@lumino/signaling';
import { Signal } from '@lumino/signaling';

import { listInstances, requestAPI } from './api';
import type { ISetupNote, IToolInstance } from './tokens';
import { EXTENSION_ID } from './tokens';

/**
 * The tool instances of the current user, refreshed while the page is
 * visible, and why they cannot be listed when they cannot (the engine is
 * unreachable, the server is gone).
 */
export class ToolInstances implements IDisposable {
  /**
   * Construct the model; it starts polling at once.
   *
   * @param options - The server settings and the poll interval.
   */
  constructor(options: ToolInstances.IOptions) {
    this._serverSettings = options.serverSettings;
    this._poll = listPoll('instances', () => this.refresh(), options);
  }

  /**
   * A signal emitted when the list or the error changed.
   */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /**
   * The instances, in the server's order (empty while an error stands).
   */
  get list(): ReadonlyArray<IToolInstance> {
    return this._list;
  }

  /**
   * Why the instances cannot be listed (the server's message), or `null`.
   */
  get error(): string | null {
    return this._error;
  }

  /**
   * What keeps tiles from showing, as the server says (no tool types
   * configured, no usable engine, the extension disabled...): asked only
   * while no instance is listed.
   */
  get notes(): ReadonlyArray<ISetupNote> {
    return this._notes;
  }

  /**
   * Whether the model is disposed.
   */
  get isDisposed(): boolean {
    return this._poll.isDisposed;
  }

  /**
   * An instance by id, if listed.
   *
   * @param id - The instance id.
   */
  get(id: string): IToolInstance | undefined {
    return this._list.find(instance => instance.id === id);
  }

  /**
   * Fetch the list now; concurrent calls share one request.
   *
   * @returns A promise that resolves once the list (or the error) is
   *   current; it does not reject.
   */
  refresh(): Promise<void> {
    if (this._pending === null) {
      this._pending = this._fetch().finally(() => {
        this._pending = null;
      });
    }
    return this._pending;
  }

  /**
   * Stop polling.
   */
  dispose(): void {
    this._poll.dispose();
    Signal.clearData(this);
  }

  private async _fetch(): Promise<void> {
    let list: IToolInstance[] = [];
    let error: string | null = null;
    try {
      list = await listInstances(this._serverSettings);
    } catch (reason) {
      error = ToolInstances.errorMessage(reason);
    }
    // Only an empty launcher section needs the reason why it is empty.
    const notes = list.length === 0 ? await getNotes(this._serverSettings) : [];
    const before = JSON.stringify([this._list, this._error, this._notes]);
    this._list = list;
    this._error = error;
    this._notes = notes;
    if (!this.isDisposed && JSON.stringify([list, error, notes]) !== before) {
      this._changed.emit();
    }
  }

  private _serverSettings: ServerConnection.ISettings;
  private _poll: Poll;
  private _list: IToolInstance[] = [];
  private _error: string | null = null;
  private _notes: ISetupNote[] = [];
  private _pending: Promise<void> | null = null;
  private _changed = new Signal<this, void>(this);
}

/**
 * The namespace for `ToolInstances` statics.
 */
export namespace ToolInstances {
  /**
   * The options of the model.
   */
  export interface IOptions {
    /**
     * The server settings.
     */
    serverSettings: ServerConnection.ISettings;

    /**
     * How often the list is refreshed while the page is visible (ms,
     * default 10 s).
     */
    interval?: number;

    /**
     * Whether to start polling at once (default `true`).
     */
    auto?: boolean;
  }

  /**
   * The message of a failed request, for the user: the server's own message
   * (a 503 says why the engine cannot be reached) or a network failure.
   *
   * @param error - What the request threw.
   */
  export function errorMessage(error: unknown): string {
    if (error instanceof ServerConnection.NetworkError) {
      return 'The Jupyter server cannot be reached.';
    }
    if (error instanceof Error && error.message !== '') {
      return error.message;
    }
    return String(error);
  }
}

/**
 * The server's setup notes (`GET /tool-terminal/api/status`); none when it
 * cannot say (an older server, the network).
 *
 * @param serverSettings - The server settings.
 */
export async function getNotes(
  serverSettings: ServerConnection.ISettings
): Promise<ISetupNote[]> {
  let data: unknown;
  try {
    data = await requestAPI<unknown>('status', serverSettings);
  } catch {
    return [];
  }
  const notes = (data as { notes?: unknown } | null)?.notes;
  if (!Array.isArray(notes)) {
    return [];
  }
  return notes.filter(
    (note): note is ISetupNote =>
      typeof note === 'object' &&
      note !== null &&
      typeof note.kind === 'string' &&
      typeof note.message === 'string' &&
      typeof note.help === 'string'
  );
}

/**
 * A poll that refreshes a list from the server while the page is visible.
 *
 * @param name - What it lists (the poll is named after it).
 * @param refresh - Fetch the list.
 * @param options - Its interval (ms, default 10 s) and whether it starts at
 *   once (default `true`).
 */
export function listPoll(
  name: string,
  refresh: () => Promise<void>,
  options: { interval?: number; auto?: boolean }
): Poll {
  return new Poll({
    auto: options.auto ?? true,
    factory: refresh,
    frequency: {
      interval: options.interval ?? 10_000,
      backoff: true,
      max: 300_000
    },
    name: `${EXTENSION_ID}:${name}`,
    standby: 'when-hidden'
  });
}

/**
 * The label of a tool instance: its display name first, then its id, and
 * its state when it is not running.
 *
 * @param id - The instance id.
 * @param instance - The listed instance, if known.
 * @param trans - The translation bundle.
 */
export function instanceLabel(
  id: string,
  instance: IToolInstance | undefined,
  trans: TranslationBundle
): string {
  if (instance === undefined) {
    return id;
  }
  if (instance.status !== 'running') {
    return trans.__(
      '%1 (%2, %3)',
      instance.display_name,
      instance.id,
      instance.status
    );
  }
  return trans.__('%1 (%2)', instance.display_name, instance.id);
}
