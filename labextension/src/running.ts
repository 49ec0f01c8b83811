// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import type { MainAreaWidget } from '@jupyterlab/apputils';
import type { IRunningSessions } from '@jupyterlab/running';
import type { ServerConnection } from '@jupyterlab/services';
import type { TranslationBundle } from '@jupyterlab/translation';
import type { CommandRegistry } from '@lumino/commands';
import type { IDisposable } from '@lumino/disposable';
import type { Poll } from '@lumino/polling';
import type { ISignal } from '@lumino/signaling';
import { Signal } from '@lumino/signaling';

import { deleteSession, listSessions } from './api';
import { toolIcon } from './icons';
import type { ToolInstances } from './instances';
import { listPoll } from './instances';
import type { ToolTerminalPanel } from './panel';
import type { ISessionModel, IToolTerminalTracker } from './tokens';
import { CommandIDs } from './tokens';

/**
 * The tool terminal sessions of the current user in JupyterLab's Running
 * panel, with shut down, like JupyterLab's own terminals.
 */
export class RunningToolTerminals
  implements IRunningSessions.IManager, IDisposable
{
  /**
   * Construct the section's manager.
   *
   * @param options - What it lists and acts with.
   */
  constructor(options: RunningToolTerminals.IOptions) {
    this._serverSettings = options.serverSettings;
    this._tracker = options.tracker;
    this._instances = options.instances;
    this._commands = options.commands;
    this._trans = options.trans;
    this.name = this._trans.__('Tool Terminals');
    this.shutdownAllLabel = this._trans.__('Shut Down All');
    this.shutdownAllConfirmationText = this._trans.__(
      'Are you sure you want to permanently shut down all running tool terminals?'
    );
    this._poll = listPoll('sessions', () => this.refresh(), options);
    // A panel's session starting, ending or being closed changes the list
    // at once: the list follows it then, not at the next poll.
    this._tracker.widgetAdded.connect(this._follow, this);
    this._tracker.forEach(widget => this._follow(this._tracker, widget));
  }

  /**
   * The section name.
   */
  readonly name: string;

  /**
   * The label of the shut down all action.
   */
  readonly shutdownAllLabel: string;

  /**
   * The text of the shut down all confirmation.
   */
  readonly shutdownAllConfirmationText: string;

  /**
   * A signal emitted when the list changed.
   */
  get runningChanged(): ISignal<this, void> {
    return this._runningChanged;
  }

  /**
   * The sessions last listed.
   */
  get sessions(): ReadonlyArray<ISessionModel> {
    return this._sessions;
  }

  /**
   * Whether the manager is disposed.
   */
  get isDisposed(): boolean {
    return this._poll.isDisposed;
  }

  /**
   * The running items: one per session, opening its panel (or a panel
   * reattached to it) when clicked.
   */
  running(): IRunningSessions.IRunningItem[] {
    return this._sessions.map(session => {
      const info = this._instances.get(session.instance);
      return {
        icon: () => toolIcon(info?.tool ?? session.tool, info?.icon),
        label: () => {
          const name = info?.display_name ?? session.instance;
          // An agent's terminal is the user's too: named after the agent.
          return session.agent
            ? this._trans.__('%1 — agent: %2', name, session.agent.name)
            : name;
        },
        labelTitle: () =>
          session.agent
            ? this._trans.__(
                'Session %1 of agent %2 in tool instance %3, %4 client(s)',
                session.id.slice(0, 8),
                session.agent.name,
                session.instance,
                session.clients
              )
            : this._trans.__(
                'Session %1 in tool instance %2, %3 client(s)',
                session.id.slice(0, 8),
                session.instance,
                session.clients
              ),
        detail: () => session.instance,
        open: () => {
          void this.open(session);
        },
        shutdown: () => this.shutdown(session)
      };
    });
  }

  /**
   * Show the panel of a session, or open a panel reattached to it.
   *
   * @param session - A listed session.
   */
  async open(session: ISessionModel): Promise<void> {
    const widget = this._tracker.find(w => w.content.sessionId === session.id);
    if (widget !== undefined) {
      widget.activate();
      return;
    }
    await this._commands.execute(CommandIDs.open, {
      instance: session.instance,
      session: session.id,
      name: `tool-terminal-${session.id.slice(0, 12)}`
    });
  }

  /**
   * Shut a session down (its processes are killed) and close its panel.
   *
   * @param session - A listed session.
   */
  async shutdown(session: ISessionModel): Promise<void> {
    const widget = this._tracker.find(w => w.content.sessionId === session.id);
    if (widget !== undefined) {
      await widget.content.closeSession().catch(() => undefined);
      widget.dispose();
    } else {
      await deleteSession(session.id, this._serverSettings).catch(
        () => undefined
      );
    }
    await this.refresh();
  }

  /**
   * Shut down every session of the user: those the server lists now (not
   * the list last shown, which may be seconds old), and every open panel's.
   */
  async shutdownAll(): Promise<void> {
    let sessions: ISessionModel[];
    try {
      sessions = await listSessions(this._serverSettings);
    } catch {
      sessions = [...this._sessions];
    }
    const listed = new Set(sessions.map(session => session.id));
    const panels: Promise<void>[] = [];
    this._tracker.forEach(widget => {
      const id = widget.content.sessionId;
      if (id === null || !listed.has(id)) {
        panels.push(
          widget.content
            .closeSession()
            .catch(() => undefined)
            .then(() => widget.dispose())
        );
      }
    });
    await Promise.all([
      ...sessions.map(session => this.shutdown(session)),
      ...panels
    ]);
    await this.refresh();
  }

  /**
   * Refresh the list now.
   */
  refreshRunning(): void {
    void this.refresh();
  }

  /**
   * Fetch the list; it does not reject (a failure keeps the last list).
   */
  async refresh(): Promise<void> {
    let sessions: ISessionModel[];
    try {
      sessions = await listSessions(this._serverSettings);
    } catch {
      return;
    }
    // A closed panel's DELETE may still be on its way: not listed again.
    const listed = new Set(sessions.map(session => session.id));
    for (const id of Array.from(this._closing)) {
      if (!listed.has(id)) {
        this._closing.delete(id);
      }
    }
    sessions = sessions.filter(session => !this._closing.has(session.id));
    if (JSON.stringify(sessions) !== JSON.stringify(this._sessions)) {
      this._sessions = sessions;
      if (!this.isDisposed) {
        this._runningChanged.emit();
      }
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
   * Follow a panel: its session starting or ending, and its closing (which
   * kills the session) refresh the list.
   */
  private _follow(
    _: IToolTerminalTracker,
    widget: MainAreaWidget<ToolTerminalPanel>
  ): void {
    const panel = widget.content;
    // The tracker announces a panel once the workspace saved it, which may be
    // after its session started: the list is asked for now as well.
    this._refreshSoon();
    panel.sessionChanged.connect(this._refreshSoon, this);
    panel.sessionEnded.connect(this._refreshSoon, this);
    widget.disposed.connect(() => {
      const id = panel.sessionId;
      // Closing the view of an agent's terminal leaves it running.
      const detached = !!panel.connection?.session.agent;
      if (id !== null && !detached && !this.isDisposed) {
        this._closing.add(id);
        const kept = this._sessions.filter(session => session.id !== id);
        if (kept.length !== this._sessions.length) {
          this._sessions = kept;
          this._runningChanged.emit();
        }
      }
      this._refreshSoon();
    });
  }

  private _refreshSoon(): void {
    if (!this.isDisposed) {
      void this._poll.refresh();
    }
  }

  private _serverSettings: ServerConnection.ISettings;
  private _tracker: IToolTerminalTracker;
  private _instances: ToolInstances;
  private _commands: CommandRegistry;
  private _trans: TranslationBundle;
  private _poll: Poll;
  private _sessions: ISessionModel[] = [];
  private _closing = new Set<string>();
  private _runningChanged = new Signal<this, void>(this);
}

/**
 * The namespace for `RunningToolTerminals` statics.
 */
export namespace RunningToolTerminals {
  /**
   * The options of the manager.
   */
  export interface IOptions {
    /**
     * The server settings.
     */
    serverSettings: ServerConnection.ISettings;

    /**
     * The tracker of tool terminal panels.
     */
    tracker: IToolTerminalTracker;

    /**
     * The instance model (display names and icons).
     */
    instances: ToolInstances;

    /**
     * The command registry (opening a panel on a session).
     */
    commands: CommandRegistry;

    /**
     * The translation bundle.
     */
    trans: TranslationBundle;

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
