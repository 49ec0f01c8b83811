// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import { ServerConnection } from '@jupyterlab/services';
import { PromiseDelegate } from '@lumino/coreutils';
import type { IDisposable } from '@lumino/disposable';
import type { Poll } from '@lumino/polling';
import type { ISignal } from '@lumino/signaling';
import { Signal } from '@lumino/signaling';

import {
  createSession,
  deleteSession,
  listSessions,
  resetSession
} from './api';
import type { ITerminalSize } from './api';
import { ToolTerminalConnection } from './connection';
import { listPoll } from './instances';
import type { ISessionModel } from './tokens';

/**
 * The tool terminal sessions of the current user, as the page sees them
 * (like `@jupyterlab/services`' `TerminalManager`): the one door of panels,
 * connections and the Running panel to the sessions REST routes of
 * `./api`. It starts sessions, connects to them, resets and shuts them down,
 * and keeps the list the server gives, refreshed while the page is visible.
 */
export class ToolTerminalSessions
  implements ToolTerminalConnection.ISessions, IDisposable
{
  /**
   * Construct the model.
   *
   * @param options - The server settings and how to poll the list.
   */
  constructor(options: ToolTerminalSessions.IOptions) {
    this.serverSettings = options.serverSettings;
    this._poll = listPoll('sessions', () => this.refreshRunning(), options);
  }

  /**
   * The server settings of the sessions.
   */
  readonly serverSettings: ServerConnection.ISettings;

  /**
   * A promise that resolves once the list was asked for the first time
   * (whether the server answered or not), like `TerminalManager.ready`.
   *
   * JupyterLab's Running panel renders a section with the list its manager
   * gives when the section is added, and drops the changes signalled while
   * the section is hidden (as during a reload, until the layout is restored)
   * or not yet rendered: the section is added once this resolves, so that
   * its first view lists the sessions.
   */
  get ready(): Promise<void> {
    return this._ready.promise;
  }

  /**
   * A signal emitted with the list when it changed.
   */
  get runningChanged(): ISignal<this, ReadonlyArray<ISessionModel>> {
    return this._runningChanged;
  }

  /**
   * Whether the model is disposed.
   */
  get isDisposed(): boolean {
    return this._poll.isDisposed;
  }

  /**
   * The sessions last listed, without those being shut down.
   */
  running(): ReadonlyArray<ISessionModel> {
    return this._running;
  }

  /**
   * Start a new session in a tool instance.
   *
   * @param instance - The tool instance id.
   * @param size - The terminal size the shell starts at, if known.
   * @returns The new session (not listed until the next refresh).
   */
  startNew(
    instance: string,
    size?: ITerminalSize | null
  ): Promise<ISessionModel> {
    return createSession(instance, this.serverSettings, size);
  }

  /**
   * Connect to a session.
   *
   * @param session - The session.
   * @param options - The reconnection options.
   * @returns A new connection, its socket opening.
   */
  connectTo(
    session: ISessionModel,
    options: Omit<ToolTerminalConnection.IOptions, 'session' | 'sessions'> = {}
  ): ToolTerminalConnection {
    return new ToolTerminalConnection({ ...options, session, sessions: this });
  }

  /**
   * Look a session up in a list fetched now.
   *
   * The list answers 200 whether the session is still there or not: a page
   * restoring panels of ended sessions logs no 403.
   *
   * @param id - The session id.
   * @returns The session, or `undefined` when the server no longer has it.
   */
  async findById(id: string): Promise<ISessionModel | undefined> {
    const sessions = await this.requestRunning();
    return sessions.find(session => session.id === id);
  }

  /**
   * Reset a session: its shell is killed and a new one starts (with the
   * startup command); attached clients stay attached.
   *
   * @param id - The session id.
   */
  reset(id: string): Promise<void> {
    return resetSession(id, this.serverSettings);
  }

  /**
   * Shut a session down: its processes are killed. A session already gone
   * (403, as for an unknown one) counts as shut down.
   *
   * @param id - The session id.
   */
  async shutdown(id: string): Promise<void> {
    try {
      await deleteSession(id, this.serverSettings);
    } catch (error) {
      if (
        !(error instanceof ServerConnection.ResponseError) ||
        error.response.status !== 403
      ) {
        throw error;
      }
    }
  }

  /**
   * Leave a session out of the list from now on, until the server no longer
   * lists it: its shutdown is on its way (a closed panel's DELETE).
   *
   * @param id - The session id.
   */
  hide(id: string): void {
    if (this.isDisposed) {
      return;
    }
    this._hidden.add(id);
    this._update(this._running);
  }

  /**
   * Fetch the list now.
   *
   * @returns The sessions the server lists (those being shut down too).
   * @throws when the list cannot be had (the list stays as it was).
   */
  async requestRunning(): Promise<ISessionModel[]> {
    const sessions = await listSessions(this.serverSettings);
    const listed = new Set(sessions.map(session => session.id));
    for (const id of Array.from(this._hidden)) {
      if (!listed.has(id)) {
        this._hidden.delete(id);
      }
    }
    this._update(sessions);
    this._ready.resolve();
    return sessions;
  }

  /**
   * Fetch the list now; it does not reject (a failure keeps the last list).
   */
  async refreshRunning(): Promise<void> {
    try {
      await this.requestRunning();
    } catch {
      // The poll asks again later; until then the list is empty, or the last.
      this._ready.resolve();
    }
  }

  /**
   * Ask the poll for the list soon: requests made at about the same time
   * share one fetch.
   */
  refreshSoon(): void {
    if (!this.isDisposed) {
      void this._poll.refresh();
    }
  }

  /**
   * Stop polling.
   */
  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._poll.dispose();
    Signal.clearData(this);
  }

  /**
   * Keep a list (without the sessions being shut down), and signal it when
   * it changed.
   */
  private _update(sessions: ReadonlyArray<ISessionModel>): void {
    const running = sessions.filter(session => !this._hidden.has(session.id));
    if (JSON.stringify(running) !== JSON.stringify(this._running)) {
      this._running = running;
      if (!this.isDisposed) {
        this._runningChanged.emit(running);
      }
    }
  }

  private _poll: Poll;
  private _ready = new PromiseDelegate<void>();
  private _running: ReadonlyArray<ISessionModel> = [];
  private _hidden = new Set<string>();
  private _runningChanged = new Signal<this, ReadonlyArray<ISessionModel>>(
    this
  );
}

/**
 * The namespace for `ToolTerminalSessions` statics.
 */
export namespace ToolTerminalSessions {
  /**
   * The options of the model.
   */
  export interface IOptions {
    /**
     * The server settings.
     */
    serverSettings: ServerConnection.ISettings;

    /**
     * How often the list is refreshed while the page is visible (ms).
     */
    interval?: number;

    /**
     * Whether to start polling at once (default `true`).
     */
    auto?: boolean;
  }
}
