// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import { URLExt } from '@jupyterlab/coreutils';
import type { ServerConnection, Terminal } from '@jupyterlab/services';
import type { JSONPrimitive } from '@lumino/coreutils';
import type { ISignal } from '@lumino/signaling';
import { Signal } from '@lumino/signaling';

import type { ISessionModel } from './tokens';
import { URL_NAMESPACE } from './tokens';

/**
 * Build the WebSocket URL of a tool terminal session.
 *
 * The URL is derived from the server settings' `wsUrl` (which carries the
 * server's base URL, e.g. a JupyterHub prefix `/user/alice/`). The token is
 * appended only when the settings ask for it (`appendToken`) and one is set;
 * a same-origin JupyterLab authenticates the socket with its cookie.
 *
 * @param sessionId - The session id.
 * @param settings - The server settings.
 * @returns The `ws:`/`wss:` URL.
 */
export function webSocketUrl(
  sessionId: string,
  settings: ServerConnection.ISettings
): string {
  let url = URLExt.join(
    settings.wsUrl,
    URL_NAMESPACE,
    'websocket',
    encodeURIComponent(sessionId)
  );
  if (settings.appendToken && settings.token !== '') {
    url += `?token=${encodeURIComponent(settings.token)}`;
  }
  return url;
}

/**
 * The WebSocket close code that detaches a client from its session without
 * ending it (the server's `DETACH_CLOSE_CODE`): its tab closed, the session
 * goes on and is reopened from the Running panel.
 */
export const DETACH_CLOSE_CODE = 4000;

/**
 * The marker xterm.js puts before pasted text when the program enabled
 * bracketed paste mode (`ESC [ ? 2004 h`).
 */
const PASTE_START = '\x1b[200~';

/**
 * The marker xterm.js puts after pasted text in bracketed paste mode.
 */
const PASTE_END = '\x1b[201~';

/**
 * Neutralise the escape characters inside a bracketed paste.
 *
 * In bracketed paste mode the program treats everything between
 * `ESC [200~` and `ESC [201~` as pasted text, not as keystrokes: a shell
 * does not run the lines of a paste until the user presses Enter. xterm.js
 * 5.5 wraps the clipboard text in the markers as it is, so a clipboard
 * holding `foo ESC [201~ LF rm -rf ~ LF` ends the paste early and the rest
 * reaches the program as typed lines (sequence smuggling). Every ESC between
 * the markers is replaced with U+241B (SYMBOL FOR ESCAPE), which shows the
 * user where the escape was but cannot start a control sequence.
 *
 * A chunk is a bracketed paste when it starts with the start marker and ends
 * with the end marker: xterm.js emits a paste as one such chunk, and no key
 * produces one. Any other chunk is returned unchanged.
 *
 * @param data - A chunk of terminal input (from xterm.js `onData`).
 * @returns The chunk, with the escapes of a bracketed paste's text replaced.
 */
export function neutralizeBracketedPaste(data: string): string {
  if (
    data.length < PASTE_START.length + PASTE_END.length ||
    !data.startsWith(PASTE_START) ||
    !data.endsWith(PASTE_END)
  ) {
    return data;
  }
  const text = data.slice(PASTE_START.length, data.length - PASTE_END.length);
  return PASTE_START + text.split('\x1b').join('\u241b') + PASTE_END;
}

/**
 * A terminal connection to a tool terminal session.
 *
 * It implements JupyterLab's `Terminal.ITerminalConnection`, so that
 * JupyterLab's own terminal widget (`@jupyterlab/terminal`) can render it,
 * against `/tool-terminal/websocket/{session_id}`.
 *
 * The widget is given only `stdout` messages. The server's `exit` (the
 * shell's exit code), `error` (a message the user must read) and
 * `disconnect` (the session is over) are emitted on {@link exited},
 * {@link errorReceived} and {@link ended}: the panel says how a session
 * ended in its own bar, and the widget's "[Finished… Term Session]" line
 * would say it a second time.
 *
 * One connection stays with one panel: when its session ends,
 * {@link startNewSession} replaces it with a new session in the same tool
 * instance and connects to it. Sessions are started, reset and shut down
 * through the page's session model (`./sessions`, which makes connections
 * with its `connectTo`).
 */
export class ToolTerminalConnection implements Terminal.ITerminalConnection {
  /**
   * Construct a new connection.
   *
   * @param options - The session to connect to and the session model.
   */
  constructor(options: ToolTerminalConnection.IOptions) {
    this._session = options.session;
    this._sessions = options.sessions;
    this.serverSettings = options.sessions.serverSettings;
    this._maxReconnects = options.maxReconnects ?? 3;
    this._reconnectDelay = options.reconnectDelay ?? 1000;
    this._createSocket();
  }

  /**
   * A signal emitted when a message is received from the server.
   */
  get messageReceived(): ISignal<this, Terminal.IMessage> {
    return this._messageReceived;
  }

  /**
   * A signal emitted when the server says the session is over (its
   * `disconnect` message).
   */
  get ended(): ISignal<this, void> {
    return this._endedSignal;
  }

  /**
   * A signal emitted when the connection status changes.
   */
  get connectionStatusChanged(): ISignal<this, Terminal.ConnectionStatus> {
    return this._connectionStatusChanged;
  }

  /**
   * A signal emitted with the shell's exit code when the shell ends.
   */
  get exited(): ISignal<this, number | null> {
    return this._exited;
  }

  /**
   * A signal emitted with an error message the user must read.
   */
  get errorReceived(): ISignal<this, string> {
    return this._errorReceived;
  }

  /**
   * The error message the server sent last, if nothing came after it on the
   * current socket: the reason the server gives before it closes a socket
   * (a logout, a revoked access, the server stopping).
   */
  get lastError(): string | null {
    return this._lastError;
  }

  /**
   * A signal emitted when the socket closed without the session ending and
   * could not be reopened.
   */
  get connectionLost(): ISignal<this, void> {
    return this._connectionLost;
  }

  /**
   * A signal emitted when the connection switched to a new session.
   */
  get sessionChanged(): ISignal<this, ISessionModel> {
    return this._sessionChanged;
  }

  /**
   * A signal emitted when the connection is disposed.
   */
  get disposed(): ISignal<this, void> {
    return this._disposed;
  }

  /**
   * The server settings of the connection.
   */
  readonly serverSettings: ServerConnection.ISettings;

  /**
   * The session id (the terminal "name" for JupyterLab's widget).
   */
  get name(): string {
    return this._session.id;
  }

  /**
   * The terminal model for JupyterLab's widget.
   */
  get model(): Terminal.IModel {
    return { name: this._session.id };
  }

  /**
   * The current session.
   */
  get session(): ISessionModel {
    return this._session;
  }

  /**
   * The tool instance id of the session.
   */
  get instance(): string {
    return this._session.instance;
  }

  /**
   * The connection status.
   */
  get connectionStatus(): Terminal.ConnectionStatus {
    return this._connectionStatus;
  }

  /**
   * Whether the session has ended (shell exited, killed or the connection
   * was lost for good).
   */
  get hasEnded(): boolean {
    return this._ended;
  }

  /**
   * The exit code of the shell, once it ended with one.
   */
  get exitCode(): number | null {
    return this._exitCode;
  }

  /**
   * Whether the connection is disposed.
   */
  get isDisposed(): boolean {
    return this._isDisposed;
  }

  /**
   * Send a message to the session.
   *
   * Only `stdin` and `set_size` are sent; messages sent before the socket is
   * open are queued. The last size is remembered and sent again on every new
   * socket, so a reconnected or new session gets the panel's size. A
   * bracketed paste has the escapes of its text neutralised
   * ({@link neutralizeBracketedPaste}): this is the one place every chunk of
   * input passes, keystrokes, the paste command and xterm's own paste alike.
   *
   * @param message - The message.
   */
  send(message: Terminal.IMessage): void {
    if (this._isDisposed) {
      return;
    }
    let content = message.content ?? [];
    if (message.type === 'set_size') {
      this._size = content.slice(0, 2);
    } else if (message.type === 'stdin') {
      if (typeof content[0] === 'string') {
        content = [neutralizeBracketedPaste(content[0]), ...content.slice(1)];
      }
    } else {
      return;
    }
    const frame = JSON.stringify([message.type, ...content]);
    if (
      this._ws !== null &&
      this._ws.readyState === Private.OPEN &&
      this._connectionStatus === 'connected'
    ) {
      this._ws.send(frame);
    } else if (message.type === 'stdin' && !this._ended) {
      if (this._pending.length < Private.MAX_PENDING) {
        this._pending.push(frame);
      }
    }
  }

  /**
   * Reconnect to the current session with a new socket.
   *
   * @returns A promise that resolves when the socket is open, or rejects
   *   when it cannot be opened.
   */
  async reconnect(): Promise<void> {
    if (this._isDisposed) {
      throw new Error('Connection is disposed');
    }
    this._reconnectAttempt = 0;
    this._ended = false;
    this._createSocket();
    return this._opened();
  }

  /**
   * Start a new session in the same tool instance and connect to it.
   *
   * The previous session's socket is closed (the server kills a session
   * whose last client disconnects).
   *
   * @returns The new session.
   */
  async startNewSession(): Promise<ISessionModel> {
    if (this._isDisposed) {
      throw new Error('Connection is disposed');
    }
    const session = await this._sessions.startNew(this._session.instance);
    if (this._isDisposed) {
      await this._sessions.shutdown(session.id).catch(() => {
        /* the server kills it without a client anyway */
      });
      throw new Error('Connection is disposed');
    }
    this._session = session;
    this._exitCode = null;
    this._sessionChanged.emit(session);
    await this.reconnect();
    return session;
  }

  /**
   * Reset the session: the server kills the shell and everything it started
   * and starts a new one (with the startup command); this socket stays.
   */
  async reset(): Promise<void> {
    await this._sessions.reset(this._session.id);
  }

  /**
   * Shut down the session (its processes are killed; one already gone is
   * shut down) and dispose of the connection.
   */
  async shutdown(): Promise<void> {
    const id = this._session.id;
    const wasEnded = this._ended;
    this.dispose();
    if (!wasEnded) {
      await this._sessions.shutdown(id);
    }
  }

  /**
   * Detach from the session and dispose of the connection: the socket closes
   * with {@link DETACH_CLOSE_CODE}, and the server keeps the session running
   * (until its idle timeout, if any) for a later reattach.
   */
  detach(): void {
    this._dispose(DETACH_CLOSE_CODE);
  }

  /**
   * Dispose of the connection: close the socket (which ends the session on
   * the server, after its grace period, when it was the last client).
   */
  dispose(): void {
    this._dispose();
  }

  /**
   * Dispose of the connection, closing the socket with a code.
   */
  private _dispose(code?: number): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._clearReconnect();
    this._closeSocket(code);
    this._updateConnectionStatus('disconnected');
    this._disposed.emit();
    Signal.clearData(this);
  }

  /**
   * Open a new socket to the current session, closing the previous one.
   */
  private _createSocket(): void {
    this._clearReconnect();
    this._closeSocket();
    this._updateConnectionStatus('connecting');
    const url = webSocketUrl(this._session.id, this.serverSettings);
    const ws = new this.serverSettings.WebSocket(url);
    this._ws = ws;
    this._openFailed = false;
    ws.onopen = () => {
      if (ws !== this._ws) {
        return;
      }
      this._lastError = null;
      this._reconnectAttempt = 0;
      this._updateConnectionStatus('connected');
      if (this._size !== null) {
        ws.send(JSON.stringify(['set_size', ...this._size]));
      }
      const pending = this._pending;
      this._pending = [];
      for (const frame of pending) {
        ws.send(frame);
      }
    };
    ws.onmessage = (event: MessageEvent) => {
      if (ws !== this._ws) {
        return;
      }
      this._onFrame(event.data);
    };
    ws.onerror = () => {
      if (ws === this._ws && this._connectionStatus !== 'connected') {
        this._openFailed = true;
      }
    };
    ws.onclose = (event: CloseEvent) => {
      if (ws !== this._ws) {
        return;
      }
      this._onClose(event.code);
    };
  }

  /**
   * Close the current socket without reacting to its close event.
   */
  private _closeSocket(code?: number): void {
    const ws = this._ws;
    this._ws = null;
    if (ws !== null) {
      ws.onopen = null;
      ws.onmessage = null;
      ws.onerror = null;
      ws.onclose = null;
      if (
        ws.readyState === Private.OPEN ||
        ws.readyState === Private.CONNECTING
      ) {
        ws.close(code);
      }
    }
  }

  /**
   * Handle one text frame from the server.
   */
  private _onFrame(data: unknown): void {
    if (typeof data !== 'string') {
      return;
    }
    let frame: unknown;
    try {
      frame = JSON.parse(data);
    } catch {
      return;
    }
    if (!Array.isArray(frame) || typeof frame[0] !== 'string') {
      return;
    }
    const [type, ...content] = frame as [string, ...JSONPrimitive[]];
    if (type !== 'disconnect') {
      this._lastError = null;
    }
    switch (type) {
      case 'setup':
        break;
      case 'stdout':
        if (typeof content[0] === 'string') {
          this._messageReceived.emit({ type: 'stdout', content: [content[0]] });
        }
        break;
      case 'exit': {
        const code = typeof content[0] === 'number' ? content[0] : null;
        this._exitCode = code;
        this._ended = true;
        this._exited.emit(code);
        break;
      }
      case 'error':
        this._lastError =
          typeof content[0] === 'string' ? content[0] : String(content[0]);
        this._errorReceived.emit(this._lastError);
        return;
      case 'disconnect':
        this._ended = true;
        this._pending = [];
        this._endedSignal.emit();
        break;
      default:
        // Unknown message types are ignored, as the protocol says.
        break;
    }
  }

  /**
   * Handle the close of the current socket: the session ended, or the
   * connection dropped and is retried a few times. A socket the server closed
   * because access is gone (revoked credentials, a read-only view no longer
   * shared) is not retried: the server would refuse it.
   *
   * @param code - The close code.
   */
  private _onClose(code: number): void {
    this._ws = null;
    if (this._isDisposed) {
      return;
    }
    const unexpected = !this._ended;
    if (
      unexpected &&
      !this._openFailed &&
      code !== Private.POLICY_VIOLATION &&
      this._reconnectAttempt < this._maxReconnects
    ) {
      // The socket dropped: try again, the server may keep the session for
      // a grace period.
      const delay = this._reconnectDelay * 2 ** this._reconnectAttempt;
      this._reconnectAttempt++;
      this._updateConnectionStatus('connecting');
      this._reconnectTimer = setTimeout(() => {
        this._reconnectTimer = null;
        if (!this._isDisposed) {
          this._createSocket();
        }
      }, delay);
      return;
    }
    if (unexpected) {
      this._ended = true;
      this._pending = [];
      this._connectionLost.emit();
    }
    this._updateConnectionStatus('disconnected');
  }

  /**
   * Resolve when the current socket opens; reject when it closes first.
   */
  private _opened(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (this._connectionStatus === 'connected') {
        resolve();
        return;
      }
      const onStatus = (
        _: ToolTerminalConnection,
        status: Terminal.ConnectionStatus
      ) => {
        if (status === 'connected') {
          this._connectionStatusChanged.disconnect(onStatus);
          resolve();
        } else if (status === 'disconnected') {
          this._connectionStatusChanged.disconnect(onStatus);
          reject(new Error('The terminal connection could not be opened'));
        }
      };
      this._connectionStatusChanged.connect(onStatus);
    });
  }

  /**
   * Stop a scheduled reconnection.
   */
  private _clearReconnect(): void {
    if (this._reconnectTimer !== null) {
      clearTimeout(this._reconnectTimer);
      this._reconnectTimer = null;
    }
  }

  /**
   * Set the connection status and emit it when it changed.
   */
  private _updateConnectionStatus(status: Terminal.ConnectionStatus): void {
    if (this._connectionStatus === status) {
      return;
    }
    this._connectionStatus = status;
    this._connectionStatusChanged.emit(status);
  }

  private _session: ISessionModel;
  private _sessions: ToolTerminalConnection.ISessions;
  private _ws: WebSocket | null = null;
  private _connectionStatus: Terminal.ConnectionStatus = 'disconnected';
  private _pending: string[] = [];
  private _size: JSONPrimitive[] | null = null;
  private _ended = false;
  private _exitCode: number | null = null;
  private _openFailed = false;
  private _isDisposed = false;
  private _maxReconnects: number;
  private _reconnectDelay: number;
  private _reconnectAttempt = 0;
  private _reconnectTimer: ReturnType<typeof setTimeout> | null = null;
  private _messageReceived = new Signal<this, Terminal.IMessage>(this);
  private _endedSignal = new Signal<this, void>(this);
  private _connectionStatusChanged = new Signal<
    this,
    Terminal.ConnectionStatus
  >(this);
  private _exited = new Signal<this, number | null>(this);
  private _errorReceived = new Signal<this, string>(this);
  private _lastError: string | null = null;
  private _sessionChanged = new Signal<this, ISessionModel>(this);
  private _connectionLost = new Signal<this, void>(this);
  private _disposed = new Signal<this, void>(this);
}

/**
 * The namespace for `ToolTerminalConnection` statics.
 */
export namespace ToolTerminalConnection {
  /**
   * The options to construct a connection.
   */
  export interface IOptions {
    /**
     * The session to connect to.
     */
    session: ISessionModel;

    /**
     * What starts, resets and shuts down sessions, with the server settings
     * the socket follows (the page's `ToolTerminalSessions`).
     */
    sessions: ISessions;

    /**
     * How many times a dropped socket is reopened before giving up
     * (default 3).
     */
    maxReconnects?: number;

    /**
     * The first reconnection delay in milliseconds, doubled on each attempt
     * (default 1000).
     */
    reconnectDelay?: number;
  }

  /**
   * The session calls a connection makes (`ToolTerminalSessions` of
   * `./sessions` has them).
   */
  export interface ISessions {
    /**
     * The server settings of the sessions.
     */
    readonly serverSettings: ServerConnection.ISettings;

    /**
     * Start a new session in a tool instance.
     */
    startNew(instance: string): Promise<ISessionModel>;

    /**
     * Reset a session (its shell starts again).
     */
    reset(id: string): Promise<void>;

    /**
     * Shut a session down; one already gone is shut down.
     */
    shutdown(id: string): Promise<void>;
  }
}

/**
 * Module internals.
 */
namespace Private {
  /**
   * The most keystroke frames queued while the socket is not open.
   */
  export const MAX_PENDING = 256;

  /**
   * The close code of a socket whose access the server withdrew.
   */
  export const POLICY_VIOLATION = 1008;

  /**
   * WebSocket `readyState` of a socket still opening.
   */
  export const CONNECTING = 0;

  /**
   * WebSocket `readyState` of an open socket.
   */
  export const OPEN = 1;
}
