// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * Side-effect free constants, REST models and tokens of jupyter-tool-terminal.
 *
 * The interfaces mirror the server's REST contract; their keys stay in the
 * snake_case the server sends.
 */

import type { IWidgetTracker, MainAreaWidget } from '@jupyterlab/apputils';
import type { ITerminal } from '@jupyterlab/terminal';
import { Token } from '@lumino/coreutils';
import type { ISignal } from '@lumino/signaling';
import type { Widget } from '@lumino/widgets';

/**
 * The npm name of the extension, used as the plugin id prefix.
 */
export const EXTENSION_ID = 'jupyter-tool-terminal';

/**
 * The URL namespace of the server extension, below the server's base URL.
 */
export const URL_NAMESPACE = 'tool-terminal';

/**
 * The translation domain of the extension.
 */
export const TRANSLATION_DOMAIN = 'jupyter-tool-terminal';

/**
 * The id of JupyterLab's own terminal settings plugin, whose user settings
 * (font, theme, scrollback...) the tool terminals follow.
 */
export const TERMINAL_SETTINGS_PLUGIN = '@jupyterlab/terminal-extension:plugin';

/**
 * The command ids of the extension.
 */
export namespace CommandIDs {
  /**
   * Open a terminal panel with a new session on a tool instance.
   */
  export const open = 'tool-terminal:open';

  /**
   * Reset the session of a panel: kill the shell, run the startup command again.
   */
  export const reset = 'tool-terminal:reset';

  /**
   * Shut down the session of a panel (kills it) and close the panel.
   */
  export const close = 'tool-terminal:close';

  /**
   * Start a new session in a panel whose session has ended.
   */
  export const restart = 'tool-terminal:restart';

  /**
   * Copy the selection of a tool terminal.
   */
  export const copy = 'tool-terminal:copy';

  /**
   * Paste the clipboard into a tool terminal.
   */
  export const paste = 'tool-terminal:paste';

  /**
   * Refresh the list of tool instances (launcher tiles).
   */
  export const refresh = 'tool-terminal:refresh-instances';
}

/**
 * A tool terminal panel, as other extensions may use it (like JupyterLab's
 * `ITerminal.ITerminal`): one terminal session in a tool instance at a time,
 * rendered by JupyterLab's terminal widget, with a new session offered once
 * one ended.
 */
export interface IToolTerminal extends Widget {
  /**
   * The tool instance id of the panel.
   */
  readonly instanceId: string;

  /**
   * The current session id (a restored panel's saved one until it is
   * attached), if any.
   */
  readonly sessionId: string | null;

  /**
   * The session attached, once the first one started.
   */
  readonly session: ISessionModel | null;

  /**
   * Whether the panel's session is live (not ended, not failed).
   */
  readonly isLive: boolean;

  /**
   * JupyterLab's terminal widget of the panel, once its first session
   * started.
   */
  readonly terminal: ITerminal.ITerminal | null;

  /**
   * What the panel said when its session ended, or `null` while it is live.
   */
  readonly endMessage: string | null;

  /**
   * A signal emitted when the panel's session changed (first start or new
   * session).
   */
  readonly sessionChanged: ISignal<this, ISessionModel>;

  /**
   * A signal emitted when the panel's session is over.
   */
  readonly sessionEnded: ISignal<this, void>;

  /**
   * A signal emitted when {@link endMessage} changed.
   */
  readonly endMessageChanged: ISignal<this, void>;

  /**
   * Open the panel's session: reattach to the saved one, or start one.
   */
  start(): Promise<void>;

  /**
   * Start a new session in the panel, after the previous one ended.
   */
  restart(): Promise<void>;

  /**
   * Reset the session: kill the shell and run the startup command again.
   */
  reset(): Promise<void>;

  /**
   * Whether closing the panel shuts its session down (the user's settings
   * say so); otherwise closing detaches and the session keeps running.
   */
  readonly shutsDownOnClose: boolean;

  /**
   * Kill the panel's session.
   */
  closeSession(): Promise<void>;

  /**
   * Set an option of the terminal widget (the panel keeps the options it
   * relies on).
   */
  setTerminalOption<K extends keyof ITerminal.IOptions>(
    option: K,
    value: ITerminal.IOptions[K]
  ): void;
}

/**
 * The tracker of tool terminal panels (like JupyterLab's `ITerminalTracker`).
 *
 * Other extensions use it to find, follow or act on the open tool terminals:
 * `tracker.currentWidget.content` is the current {@link IToolTerminal}.
 */
export type IToolTerminalTracker = IWidgetTracker<
  MainAreaWidget<IToolTerminal>
>;

/**
 * The token of the tool terminal tracker, provided by the main plugin.
 */
export const IToolTerminalTracker = new Token<IToolTerminalTracker>(
  `${EXTENSION_ID}:IToolTerminalTracker`,
  'A widget tracker of tool terminal panels: use it to find or act on the open terminals in tool instances.'
);

/**
 * Something that keeps the user from tool terminals, as
 * `GET /tool-terminal/api/status` says it.
 */
export interface ISetupNote {
  /**
   * What it is about (`no-tool-types`, `engine`, `disabled`,
   * `unknown-tool-types`...).
   */
  kind: string;

  /**
   * What is wrong or missing, for the user.
   */
  message: string;

  /**
   * The URL of the README section that explains the fix (may be empty).
   */
  help: string;
}

/**
 * A tool instance of the current user, as listed by
 * `GET /tool-terminal/api/instances`.
 */
export interface IToolInstance {
  /**
   * The instance id (the container name).
   */
  id: string;

  /**
   * The tool type name.
   */
  tool: string;

  /**
   * The display name of the tool type.
   */
  display_name: string;

  /**
   * Docker's container state (`running`, `exited`...).
   */
  status: string;

  /**
   * Whether the tool type runs a startup command before the shell.
   */
  has_startup_command: boolean;

  /**
   * The SVG icon of the tool type, if the operator configured one.
   */
  icon?: string | null;

  /**
   * The user the tool type's shells run as (`null`: the image's own user).
   */
  user?: string | null;
}

/**
 * A terminal session, as returned by the sessions REST routes.
 */
export interface ISessionModel {
  /**
   * The session id (unguessable).
   */
  id: string;

  /**
   * The tool instance id the session runs in.
   */
  instance: string;

  /**
   * The tool type name.
   */
  tool: string;

  /**
   * Creation time (ISO 8601).
   */
  created: string;

  /**
   * Last input or output time (ISO 8601).
   */
  last_activity: string;

  /**
   * The number of attached clients.
   */
  clients: number;

  /**
   * The AI agent that opened the session through the MCP endpoint, if one
   * did (the session is still the user's own: they watch it, type, close it).
   */
  agent?: ISessionAgent | null;
}

/**
 * The agent a session belongs to, as the sessions REST routes name it.
 */
export interface ISessionAgent {
  /**
   * The agent id.
   */
  id: string;

  /**
   * The name the user gave the agent.
   */
  name: string;
}

/**
 * A session another user shared, as `GET .../sessions?role=observer` lists it.
 */
export interface IObservedSession extends ISessionModel {
  /**
   * Whose session it is.
   */
  owner: string;
}
