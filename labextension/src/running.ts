// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import type { MainAreaWidget } from '@jupyterlab/apputils';
import type { IRunningSessions } from '@jupyterlab/running';
import type { TranslationBundle } from '@jupyterlab/translation';
import type { CommandRegistry } from '@lumino/commands';
import type { IDisposable } from '@lumino/disposable';
import type { ISignal } from '@lumino/signaling';
import { Signal } from '@lumino/signaling';

import { toolIcon } from './icons';
import type { ToolInstances } from './instances';
import type { ToolTerminalSessions } from './sessions';
import type {
  ISessionModel,
  IToolTerminal,
  IToolTerminalTracker
} from './tokens';
import { CommandIDs } from './tokens';

/**
 * The tool terminal sessions of the current user in JupyterLab's Running
 * panel, with shut down, like JupyterLab's own terminals: the list of the
 * page's session model, and the panels of the tracker.
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
    this._sessions = options.sessions;
    this._tracker = options.tracker;
    this._instances = options.instances;
    this._commands = options.commands;
    this._trans = options.trans;
    this.name = this._trans.__('Tool Terminals');
    this.shutdownAllLabel = this._trans.__('Shut Down All');
    this.shutdownAllConfirmationText = this._trans.__(
      'Are you sure you want to permanently shut down all running tool terminals?'
    );
    this._sessions.runningChanged.connect(this._onRunningChanged, this);
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
    return this._sessions.running();
  }

  /**
   * Whether the manager is disposed.
   */
  get isDisposed(): boolean {
    return this._isDisposed;
  }

  /**
   * The running items: one per session, opening its panel (or a panel
   * reattached to it) when clicked.
   */
  running(): IRunningSessions.IRunningItem[] {
    const listed = this._sessions.running();
    return listed.map(session => {
      const info = this._instances.get(session.instance);
      // Each terminal names its instance, and is numbered among that
      // instance's terminals (oldest first) when it has several.
      const siblings = listed
        .filter(other => other.instance === session.instance)
        .sort((a, b) => a.created.localeCompare(b.created));
      const number = siblings.indexOf(session) + 1;
      return {
        icon: () => toolIcon(info?.tool ?? session.tool, info?.icon),
        label: () => {
          const display = info?.display_name ?? session.instance;
          // An agent's terminal is the user's too: named after the agent.
          const name = session.agent
            ? this._trans.__('%1 — agent: %2', display, session.agent.name)
            : display;
          // (An instance listed under its id names itself already.)
          const where = display === session.instance ? null : session.instance;
          if (siblings.length > 1) {
            return where === null
              ? this._trans.__('%1 (%2)', name, number)
              : this._trans.__('%1 (%2, %3)', name, where, number);
          }
          return where === null ? name : this._trans.__('%1 (%2)', name, where);
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
      await this._sessions.shutdown(session.id).catch(() => undefined);
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
      sessions = await this._sessions.requestRunning();
    } catch {
      sessions = [...this._sessions.running()];
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
  refresh(): Promise<void> {
    return this._sessions.refreshRunning();
  }

  /**
   * Stop following the session model and the panels.
   */
  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._isDisposed = true;
    Signal.clearData(this);
  }

  /**
   * Signal the model's list changes as the section's.
   */
  private _onRunningChanged(): void {
    if (!this.isDisposed) {
      this._runningChanged.emit();
    }
  }

  /**
   * Follow a panel: its session starting or ending, and its closing (which
   * detaches from the session or shuts it down) refresh the list.
   */
  private _follow(
    _: IToolTerminalTracker,
    widget: MainAreaWidget<IToolTerminal>
  ): void {
    const panel = widget.content;
    // The tracker announces a panel once the workspace saved it, which may be
    // after its session started: the list is asked for now as well.
    this._refreshSoon();
    panel.sessionChanged.connect(this._refreshSoon, this);
    panel.sessionEnded.connect(this._refreshSoon, this);
    widget.disposed.connect(() => {
      const id = panel.sessionId;
      // A panel that shut its session down on closing: its DELETE may still
      // be on its way. One that detached leaves its session listed.
      if (id !== null && panel.shutsDownOnClose && !this.isDisposed) {
        this._sessions.hide(id);
      }
      this._refreshSoon();
    });
  }

  private _refreshSoon(): void {
    if (!this.isDisposed) {
      this._sessions.refreshSoon();
    }
  }

  private _sessions: ToolTerminalSessions;
  private _tracker: IToolTerminalTracker;
  private _instances: ToolInstances;
  private _commands: CommandRegistry;
  private _trans: TranslationBundle;
  private _isDisposed = false;
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
     * The page's session model (it lists and polls the sessions).
     */
    sessions: ToolTerminalSessions;

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
  }
}
