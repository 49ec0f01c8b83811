// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import type { Terminal as TerminalNS } from '@jupyterlab/services';
import { ITerminal, Terminal } from '@jupyterlab/terminal';
import type { ITranslator, TranslationBundle } from '@jupyterlab/translation';
import { nullTranslator } from '@jupyterlab/translation';
import type { ISignal } from '@lumino/signaling';
import { Signal } from '@lumino/signaling';
import { MessageLoop } from '@lumino/messaging';
import type { Message } from '@lumino/messaging';
import { Panel, Widget } from '@lumino/widgets';

import { listInstances } from './api';
import type { ITerminalSize } from './api';
import type { ToolTerminalConnection } from './connection';
import { Osc52Scanner } from './osc52';
import type { ToolTerminalSessions } from './sessions';
import type { IToolTerminalPreferences } from './settings';
import { DEFAULT_PREFERENCES } from './settings';
import type { IToolTerminal, ISessionModel } from './tokens';
import { TRANSLATION_DOMAIN } from './tokens';

/**
 * The class of a tool terminal panel.
 */
const PANEL_CLASS = 'jp-ToolTerminal';

/**
 * The class of the panel's status bar (exit code, errors, actions).
 */
const STATUS_CLASS = 'jp-ToolTerminal-status';

/**
 * The options JupyterLab's terminal widget must have in a tool terminal: the
 * panel, not the widget, closes on exit and shuts its session down on close
 * (it knows which exits and which sessions those are), and nothing is typed
 * for the user.
 */
const FORCED_OPTIONS: Partial<ITerminal.IOptions> = {
  closeOnExit: false,
  shutdownOnClose: false,
  initialCommand: ''
};

/**
 * The exit codes from 126 up say the shell could not run (126, 127) or was
 * killed by a signal (128 + n, as when its instance stops): a panel whose
 * shell ended so stays open to say why, whatever "Close on exit" says.
 */
const FIRST_UNEXPECTED_EXIT = 126;

/**
 * The class JupyterLab's terminal widget gives itself, which JupyterLab's
 * terminal context menu (Copy, Paste, Refresh Terminal: commands of its own
 * terminals only) is bound to. A tool terminal's widget drops it: its own
 * Copy and Paste are in its menu.
 */
const LAB_TERMINAL_CLASS = 'jp-Terminal';

/**
 * A panel with one terminal session in a tool instance, rendered by
 * JupyterLab's own terminal widget, and a status bar that shows how the
 * session ended and offers a new one. What other extensions may use of it
 * is {@link IToolTerminal}.
 */
export class ToolTerminalPanel extends Panel implements IToolTerminal {
  /**
   * Construct a new panel. Call {@link start} to open its session.
   *
   * @param options - The tool instance, session model and terminal options.
   */
  constructor(options: ToolTerminalPanel.IOptions) {
    super();
    this.addClass(PANEL_CLASS);
    this.instanceId = options.instance;
    this._sessions = options.sessions;
    this._translator = options.translator ?? nullTranslator;
    this._trans = this._translator.load(TRANSLATION_DOMAIN);
    this._terminalOptions = { ...(options.terminalOptions ?? {}) };
    this._preferences = options.preferences ?? { ...DEFAULT_PREFERENCES };
    this._find = options.find ?? null;
    // (Capturing: before the terminal's own handler sends the key on.)
    this.node.addEventListener('keydown', this._onKeydown, true);
    // An empty id is no session (older layouts saved one).
    this._sessionId = options.sessionId || null;
    this._endMessage = options.endMessage || null;

    this._status = new Widget();
    this._status.addClass(STATUS_CLASS);
    this._status.node.setAttribute('role', 'status');
    this._message = document.createElement('span');
    this._message.className = 'jp-ToolTerminal-statusMessage';
    this._restartButton = Private.button(
      this._trans.__('Start a new session'),
      'jp-ToolTerminal-restart jp-mod-accept'
    );
    this._restartButton.addEventListener('click', () => {
      void this.restart().catch(() => {
        /* shown in the status bar */
      });
    });
    this._status.node.append(this._message, this._restartButton);
    this._status.hide();
    this.addWidget(this._status);
  }

  /**
   * The tool instance id of the panel.
   */
  readonly instanceId: string;

  /**
   * The connection of the panel, once its first session started.
   */
  get connection(): ToolTerminalConnection | null {
    return this._connection;
  }

  /**
   * JupyterLab's terminal widget of the panel, once its first session
   * started.
   */
  get terminal(): Terminal | null {
    return this._terminal;
  }

  /**
   * The current session id, if any.
   */
  get sessionId(): string | null {
    return this._connection?.session.id ?? this._sessionId;
  }

  /**
   * The session attached, once the first one started.
   */
  get session(): ISessionModel | null {
    return this._connection?.session ?? null;
  }

  /**
   * Whether the panel's session is live (not ended, not failed).
   */
  get isLive(): boolean {
    return this._connection !== null && !this._connection.hasEnded;
  }

  /**
   * A signal emitted when the panel's session changed (first start or new
   * session).
   */
  get sessionChanged(): ISignal<this, ISessionModel> {
    return this._sessionChanged;
  }

  /**
   * What the panel said when its session ended (an exit, a stopped
   * instance, a revoked access), or `null` while it is live. Saved with the
   * layout, so that a reload says the same instead of guessing.
   */
  get endMessage(): string | null {
    return this._endMessage;
  }

  /**
   * A signal emitted when {@link endMessage} changed.
   */
  get endMessageChanged(): ISignal<this, void> {
    return this._endMessageChanged;
  }

  /**
   * A signal emitted when the panel's session is over (its shell ended, it
   * was killed or its instance stopped).
   */
  get sessionEnded(): ISignal<this, void> {
    return this._sessionEnded;
  }

  /**
   * Open the panel's session: reattach to the session given at construction
   * (a panel restored after a reload) or start a new one.
   *
   * A restored panel whose session is gone (its grace period expired, its
   * instance stopped or was removed) says so and offers a new session; it
   * does not start one by itself.
   *
   * @returns A promise that resolves when the session is attached, or the
   *   panel says why not; failures are shown in the panel and re-thrown.
   */
  async start(): Promise<void> {
    if (this._connection !== null) {
      return;
    }
    const restored = this._sessionId;
    this._showStatus(
      restored === null
        ? this._trans.__('Starting a session…')
        : this._trans.__('Reattaching to the session…'),
      false
    );
    let session: ISessionModel | null = null;
    try {
      if (restored === null) {
        session = await this._sessions.startNew(
          this.instanceId,
          Private.estimateSize(this.node, {
            ...ITerminal.defaultOptions,
            ...this._terminalOptions
          })
        );
      } else {
        // An ended session costs no 403 in the browser's console.
        const found = await this._sessions.findById(restored);
        session = found?.instance === this.instanceId ? found : null;
      }
    } catch (error) {
      this._startFailed(error);
      throw error;
    }
    if (this.isDisposed) {
      return;
    }
    if (session === null) {
      // The id stays saved: the next reload says the same, rather than
      // starting a shell nobody asked for. "Start a new session" forgets it.
      // How it ended, when the page saw it, says more than the instance's
      // state now (a stopped instance may run again by the reload).
      this._showStatus(this._endMessage ?? (await this._goneMessage()), true);
      return;
    }
    this._attach(session);
  }

  /**
   * Say that a session could not be started, and why.
   */
  private _startFailed(error: unknown): void {
    this._showStatus(
      this._trans.__(
        'Could not start a session in %1: %2',
        this.instanceId,
        Private.errorText(error)
      ),
      true
    );
  }

  /**
   * Start a new session in the panel, after the previous one ended (or when
   * the panel has none).
   */
  async restart(): Promise<void> {
    if (this._connection === null) {
      this._sessionId = null;
      return this.start();
    }
    this._showStatus(this._trans.__('Starting a new session…'), false);
    try {
      await this._connection.startNewSession();
    } catch (error) {
      this._startFailed(error);
      throw error;
    }
  }

  /**
   * Reset the session: kill the shell and run the startup command again, in
   * this panel.
   */
  async reset(): Promise<void> {
    if (this._connection === null || this._connection.hasEnded) {
      return this.restart();
    }
    await this._connection.reset();
  }

  /**
   * Whether closing the panel shuts its session down (the user's settings
   * say so, and it is not an agent's terminal, which is the agent's to
   * close); otherwise closing it detaches, and the session keeps running.
   */
  get shutsDownOnClose(): boolean {
    return (
      this._terminalOptions.shutdownOnClose === true &&
      !this._connection?.session.agent
    );
  }

  /**
   * Kill the panel's session.
   */
  async closeSession(): Promise<void> {
    const connection = this._connection;
    if (connection !== null) {
      await connection.shutdown();
    }
  }

  /**
   * Set an option of the terminal widget (from the user's terminal settings).
   * The options the panel handles itself (`closeOnExit`, `shutdownOnClose`,
   * `initialCommand`) are kept by the panel, not given to the widget.
   *
   * @param option - The option name.
   * @param value - The option value.
   */
  setTerminalOption<K extends keyof ITerminal.IOptions>(
    option: K,
    value: ITerminal.IOptions[K]
  ): void {
    this._terminalOptions[option] = value;
    if (option in FORCED_OPTIONS) {
      return;
    }
    if (this._terminal !== null) {
      this._terminal.setOption(option, value);
    }
  }

  /**
   * Dispose of the panel, its terminal widget and its connection: the
   * session is shut down when {@link shutsDownOnClose}, else detached (it
   * keeps running, and the Running panel or its tile reopens it).
   * *Shut Down Tool Terminal Session* always ends it.
   */
  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    const connection = this._connection;
    const shutDown = this.shutsDownOnClose;
    super.dispose();
    if (connection !== null && !connection.isDisposed) {
      if (shutDown) {
        void connection.shutdown().catch(() => {
          /* the server kills a session without clients anyway */
        });
      } else {
        connection.detach();
      }
    }
    Signal.clearData(this);
  }

  /**
   * Give the focus to the terminal.
   */
  protected onActivateRequest(msg: Message): void {
    if (this._terminal !== null) {
      this._terminal.activate();
    } else {
      this.node.tabIndex = -1;
      this.node.focus();
    }
  }

  /**
   * Create the connection and the terminal widget for a session.
   */
  private _attach(session: ISessionModel): void {
    const connection = this._sessions.connectTo(session);
    this._connection = connection;
    connection.exited.connect(this._onExited, this);
    connection.errorReceived.connect(this._onError, this);
    connection.connectionLost.connect(this._onLost, this);
    connection.sessionChanged.connect(this._onSessionChanged, this);
    connection.connectionStatusChanged.connect(this._onStatusChanged, this);
    connection.ended.connect(this._onEnded, this);
    connection.messageReceived.connect(this._onOutput, this);

    const terminal = new Terminal(
      connection,
      { ...this._terminalOptions, ...FORCED_OPTIONS },
      this._translator
    );
    terminal.addClass('jp-ToolTerminal-terminal');
    terminal.removeClass(LAB_TERMINAL_CLASS);
    this._terminal = terminal;
    this.insertWidget(0, terminal);
    this._hideStatus();
    this._sessionChanged.emit(session);
    if (this.isVisible) {
      terminal.activate();
    }
  }

  /**
   * Honour a program's OSC 52 copy: in the user's own terminal, when the
   * settings allow it, never in an agent's terminal (what an agent prints
   * must not land on the user's clipboard).
   */
  private _onOutput(
    connection: ToolTerminalConnection,
    message: TerminalNS.IMessage
  ): void {
    const chunk = message.content?.[0];
    if (message.type !== 'stdout' || typeof chunk !== 'string') {
      return;
    }
    this._followScreen(chunk);
    const texts = this._osc52.feed(chunk);
    if (
      texts.length === 0 ||
      !this._preferences.osc52Copy ||
      connection.session.agent
    ) {
      return;
    }
    void navigator.clipboard?.writeText(texts[texts.length - 1]).catch(() => {
      /* the page has no focus, or the browser refuses: nothing to do */
    });
  }

  /**
   * Keep up with whether a full-screen program (vi, less, top) holds the
   * alternate screen: Ctrl+F is then the program's (page down), not find.
   */
  private _followScreen(chunk: string): void {
    let last: string | undefined;
    const pattern = new RegExp(Private.ALTERNATE_SCREEN.source, 'g');
    for (let match = pattern.exec(chunk); match; match = pattern.exec(chunk)) {
      last = match[2];
    }
    if (last !== undefined) {
      this._alternateScreen = last === 'h';
    }
  }

  /**
   * Ctrl+F (Cmd+F) while the terminal has the focus: JupyterLab's find, in
   * the shell (the terminal widget would send it to the shell as ^F, as
   * JupyterLab's own terminal does). A full-screen program keeps its ^F.
   */
  private _onKeydown = (event: KeyboardEvent): void => {
    if (
      this._find === null ||
      this._alternateScreen ||
      !(event.ctrlKey || event.metaKey) ||
      event.altKey ||
      event.shiftKey ||
      event.key.toLowerCase() !== 'f'
    ) {
      return;
    }
    event.preventDefault();
    event.stopPropagation();
    this._find();
  };

  /**
   * Why the session a panel was restored with is gone, as far as the
   * instance list tells.
   */
  private async _goneMessage(): Promise<string> {
    const instance = await this._instanceState();
    if (instance === undefined) {
      return this._trans.__(
        'The session of this panel has ended: it was closed, or no page was attached to it for longer than the server keeps it.'
      );
    }
    if (instance === null) {
      return this._trans.__(
        'The tool instance %1 is gone, and the session of this panel with it.',
        this.instanceId
      );
    }
    return this._trans.__(
      'The tool instance %1 is %2: the session of this panel has ended.',
      this.instanceId,
      instance
    );
  }

  /**
   * The state of the panel's instance when it is not running: its status,
   * `null` when it is not listed, `undefined` when it runs (or the list
   * cannot be had).
   */
  private async _instanceState(): Promise<string | null | undefined> {
    try {
      const instances = await listInstances(this._sessions.serverSettings);
      const instance = instances.find(i => i.id === this.instanceId);
      if (instance === undefined) {
        return null;
      }
      return instance.status === 'running' ? undefined : instance.status;
    } catch {
      return undefined;
    }
  }

  /**
   * Show how the shell ended: an exit code, or the instance that stopped
   * under it (the engine reports a stopped container's shells as killed,
   * code 137, which tells the user nothing).
   */
  private _onExited(
    connection: ToolTerminalConnection,
    code: number | null
  ): void {
    this._showStatus(
      code === null
        ? this._trans.__('The shell ended.')
        : this._trans.__('The shell exited with code %1.', code),
      true
    );
    // Only a shell killed by a signal (128 + n) may have gone with its
    // instance; the engine reports the container stopped a moment after its
    // processes died, so the state is asked a few times.
    if (code === null || code < 128) {
      return;
    }
    const session = connection.session.id;
    const current = () =>
      !this.isDisposed &&
      this._connection === connection &&
      connection.hasEnded &&
      connection.session.id === session;
    void (async () => {
      for (const delay of Private.STOP_CHECK_DELAYS) {
        await new Promise(resolve => setTimeout(resolve, delay));
        if (!current()) {
          return;
        }
        if ((await this._instanceState()) !== undefined && current()) {
          this._showStatus(
            this._trans.__(
              'The tool instance %1 stopped; the terminal has ended.',
              this.instanceId
            ),
            true
          );
          return;
        }
      }
    })();
  }

  /**
   * Offer a new session once the session is over: after an exit, an error
   * (the server says why, then disconnects) or a kill.
   */
  private _onEnded(connection: ToolTerminalConnection): void {
    this._sessionEnded.emit();
    // "Close on exit": a shell that exited by itself closes its panel, as
    // JupyterLab's terminal does (its session is over: nothing to keep).
    const code = connection.exitCode;
    if (
      this._terminalOptions.closeOnExit === true &&
      code !== null &&
      code < FIRST_UNEXPECTED_EXIT &&
      connection.lastError === null
    ) {
      this.dispose();
      return;
    }
    if (this._status.isHidden) {
      this._showStatus(this._trans.__('The session is over.'), true);
    } else {
      this._restartButton.hidden = false;
      this._status.addClass('jp-mod-ended');
      this._rememberEnd(this._message.textContent ?? '');
    }
  }

  /**
   * Keep what the panel says about its ended session, for the next reload.
   */
  private _rememberEnd(message: string): void {
    if (message !== '' && message !== this._endMessage) {
      this._endMessage = message;
      this._endMessageChanged.emit();
    }
  }

  /**
   * Show an error message from the server.
   */
  private _onError(connection: ToolTerminalConnection, message: string): void {
    this._showStatus(message, connection.hasEnded, true);
  }

  /**
   * Show a connection lost for good.
   */
  private _onLost(connection: ToolTerminalConnection): void {
    // The server may have said why before it closed (a logout, a revoked
    // access, the server stopping): keep that, it says more.
    if (connection.lastError !== null) {
      this._showStatus(connection.lastError, true, true);
      return;
    }
    this._showStatus(
      this._trans.__('The connection to the session was lost.'),
      true,
      true
    );
  }

  /**
   * Hide the status bar when the terminal (re)connects to a live session.
   */
  private _onStatusChanged(
    connection: ToolTerminalConnection,
    status: string
  ): void {
    if (status === 'connected' && !connection.hasEnded) {
      this._hideStatus();
    }
  }

  /**
   * Forward the new session to listeners.
   */
  private _onSessionChanged(
    _: ToolTerminalConnection,
    session: ISessionModel
  ): void {
    this._sessionId = session.id;
    this._osc52 = new Osc52Scanner();
    this._alternateScreen = false;
    if (this._endMessage !== null) {
      this._endMessage = null;
      this._endMessageChanged.emit();
    }
    this._sessionChanged.emit(session);
  }

  /**
   * Show a message in the status bar.
   *
   * @param message - The text (rendered as text, never as HTML).
   * @param offerRestart - Whether to show the new session button.
   * @param isError - Whether the message is an error.
   */
  private _showStatus(
    message: string,
    offerRestart: boolean,
    isError = false
  ): void {
    this._message.textContent = message;
    if (offerRestart && this._connection?.hasEnded) {
      this._rememberEnd(message);
    }
    this._restartButton.hidden = !offerRestart;
    this._status.toggleClass('jp-mod-error', isError);
    this._status.toggleClass('jp-mod-ended', offerRestart);
    if (this._status.isHidden) {
      this._status.show();
      this._fitTerminal();
    }
  }

  /**
   * Hide the status bar.
   */
  private _hideStatus(): void {
    if (!this._status.isHidden) {
      this._status.hide();
      this._fitTerminal();
    }
  }

  /**
   * Ask the terminal widget to fit the space the status bar leaves.
   */
  private _fitTerminal(): void {
    if (this._terminal !== null && !this._terminal.isDisposed) {
      MessageLoop.postMessage(this._terminal, Widget.Msg.FitRequest);
    }
  }

  private _sessions: ToolTerminalSessions;
  private _translator: ITranslator;
  private _trans: TranslationBundle;
  private _terminalOptions: Partial<ITerminal.IOptions>;
  private _preferences: IToolTerminalPreferences;
  private _osc52 = new Osc52Scanner();
  private _alternateScreen = false;
  private _find: (() => void) | null;
  private _sessionId: string | null;
  private _connection: ToolTerminalConnection | null = null;
  private _terminal: Terminal | null = null;
  private _status: Widget;
  private _message: HTMLSpanElement;
  private _restartButton: HTMLButtonElement;
  private _sessionChanged = new Signal<this, ISessionModel>(this);
  private _sessionEnded = new Signal<this, void>(this);
  private _endMessage: string | null;
  private _endMessageChanged = new Signal<this, void>(this);
}

/**
 * The namespace for `ToolTerminalPanel` statics.
 */
export namespace ToolTerminalPanel {
  /**
   * The options to construct a panel.
   */
  export interface IOptions {
    /**
     * The tool instance id.
     */
    instance: string;

    /**
     * The page's session model (it starts and connects the panel's
     * sessions).
     */
    sessions: ToolTerminalSessions;

    /**
     * The translator.
     */
    translator?: ITranslator;

    /**
     * JupyterLab terminal widget options (the user's terminal settings).
     */
    terminalOptions?: Partial<ITerminal.IOptions>;

    /**
     * The extension's own settings (shared, updated in place).
     */
    preferences?: IToolTerminalPreferences;

    /**
     * Open JupyterLab's find on the panel (Ctrl+F in the terminal), if
     * there is one.
     */
    find?: () => void;

    /**
     * A session to reattach to (restoring a panel after a reload); when it
     * is gone the panel says so and offers a new session. Empty is none.
     */
    sessionId?: string;

    /**
     * What the panel said when that session ended, if the page saw it end
     * (saved with the layout); empty is nothing.
     */
    endMessage?: string;
  }
}

/**
 * Module internals.
 */
namespace Private {
  /**
   * The terminal size a panel's node will hold, in character cells, as far
   * as it can be told before the terminal widget exists (from the node's size
   * and the terminal font), or `null` when it cannot (a hidden panel, no
   * canvas). The terminal resizes to its exact size once attached.
   */
  export function estimateSize(
    node: HTMLElement,
    options: Pick<ITerminal.IOptions, 'fontFamily' | 'fontSize' | 'lineHeight'>
  ): ITerminalSize | null {
    const { clientWidth: width, clientHeight: height } = node;
    const context = document.createElement('canvas').getContext('2d');
    if (!width || !height || !context) {
      return null;
    }
    const fontSize = options.fontSize ?? 13;
    context.font = `${fontSize}px ${options.fontFamily ?? 'monospace'}`;
    const cellWidth = context.measureText('W').width;
    // xterm.js's cell is the font's line box: about 1.2 times its size.
    const cellHeight = fontSize * 1.2 * (options.lineHeight ?? 1);
    if (!(cellWidth > 0)) {
      return null;
    }
    return {
      rows: Math.max(1, Math.floor(height / cellHeight)),
      cols: Math.max(1, Math.floor(width / cellWidth))
    };
  }

  /**
   * How long to wait before each look at the instance's state after its
   * shell was killed (ms).
   */
  export const STOP_CHECK_DELAYS = [0, 250, 750, 2000];

  /**
   * A program entering (`h`) or leaving (`l`) the alternate screen.
   */
  // eslint-disable-next-line no-control-regex -- ESC starts the sequence
  export const ALTERNATE_SCREEN = /\x1b\[\?(1049|1047|47)([hl])/;

  /**
   * Create a styled button.
   */
  export function button(label: string, className: string): HTMLButtonElement {
    const node = document.createElement('button');
    node.type = 'button';
    node.className = `jp-Button jp-mod-styled ${className}`;
    node.textContent = label;
    return node;
  }

  /**
   * The text of an error for the user.
   */
  export function errorText(error: unknown): string {
    if (error instanceof Error) {
      return error.message;
    }
    return String(error);
  }
}
