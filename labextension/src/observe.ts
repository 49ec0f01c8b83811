// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * Read-only views of tool terminals: the owner shares a session with another
 * user by name ("Share Read-Only…" on the panel) and stops sharing it ("Stop
 * Sharing Read-Only…"), and that user opens it in an observer panel ("Watch a
 * Shared Tool Terminal…"), which shows the screen and the live output, sends
 * nothing, and says so when the view ends. Observer panels are tracked (and
 * restored after a reload while the session is still shared); the REST calls
 * are in `./api`.
 */

import type {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ILayoutRestorer } from '@jupyterlab/application';
import {
  ICommandPalette,
  InputDialog,
  MainAreaWidget,
  Notification,
  showErrorMessage,
  WidgetTracker
} from '@jupyterlab/apputils';
import type { ServerConnection } from '@jupyterlab/services';
import type { Terminal as TerminalNS } from '@jupyterlab/services';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import type { ITerminal } from '@jupyterlab/terminal';
import { Terminal } from '@jupyterlab/terminal';
import { ITranslator, nullTranslator } from '@jupyterlab/translation';
import { Widget } from '@lumino/widgets';

import { listObserved, listObservers, shareReadOnly, stopSharing } from './api';
import {
  DEFAULT_PREFERENCES,
  followTerminalSettings,
  toolTerminalSettings
} from './settings';
import { ToolTerminalConnection } from './connection';
import type { IObservedSession, ISessionModel } from './tokens';
import {
  EXTENSION_ID,
  IToolTerminalTracker,
  TRANSLATION_DOMAIN
} from './tokens';

/**
 * The command ids of the observer feature.
 */
export namespace ObserveCommandIDs {
  /**
   * Share the current tool terminal's session read-only with a user.
   */
  export const share = 'tool-terminal:share-read-only';

  /**
   * Stop sharing the current tool terminal's session with a user.
   */
  export const unshare = 'tool-terminal:stop-sharing';

  /**
   * Open a session another user shared with the current user, read-only.
   */
  export const observe = 'tool-terminal:observe';
}

/**
 * A connection that only receives: keystrokes and size changes of an
 * observer never leave the browser (the server would refuse them), and it
 * starts, resets and shuts down no session (closing it leaves the owner's
 * session alone).
 */
export class ObserverConnection extends ToolTerminalConnection {
  /**
   * Construct a connection to a shared session.
   *
   * @param options - The session and the server settings.
   */
  constructor(options: ObserverConnection.IOptions) {
    super({ ...options, sessions: Private.watchOnly(options.serverSettings) });
  }

  /**
   * Drop the message: an observer does not type or resize.
   */
  send(message: TerminalNS.IMessage): void {
    void message;
  }
}

/**
 * The namespace for `ObserverConnection` statics.
 */
export namespace ObserverConnection {
  /**
   * The options to construct an observer connection.
   */
  export interface IOptions extends Omit<
    ToolTerminalConnection.IOptions,
    'session' | 'sessions'
  > {
    /**
     * The shared session.
     */
    session: ISessionModel;

    /**
     * The server settings.
     */
    serverSettings: ServerConnection.ISettings;
  }
}

/**
 * The options JupyterLab's terminal widget must have in an observer panel:
 * closing it leaves the owner's session alone, and it types nothing.
 */
const OBSERVER_OPTIONS: Partial<ITerminal.IOptions> = {
  shutdownOnClose: false,
  closeOnExit: false,
  initialCommand: ''
};

/**
 * A main-area panel with JupyterLab's terminal widget showing a shared
 * session, read-only; closing it leaves the owner's session alone. It looks
 * as the user's terminals do (`terminalOptions`: their terminal settings).
 *
 * When the view ends (the owner stopped sharing, the session ended, the
 * connection was lost) a status bar above the terminal says why; the last
 * screen stays readable.
 */
export function createObserverPanel(
  session: IObservedSession,
  serverSettings: ServerConnection.ISettings,
  translator: ITranslator = nullTranslator,
  terminalOptions: Partial<ITerminal.IOptions> = {}
): MainAreaWidget<Terminal> {
  const trans = translator.load(TRANSLATION_DOMAIN);
  const connection = new ObserverConnection({ session, serverSettings });
  const terminal = new Terminal(
    connection,
    { ...terminalOptions, ...OBSERVER_OPTIONS },
    translator
  );
  const panel = new MainAreaWidget({ content: terminal });
  panel.addClass('jp-ToolTerminal-observer');
  // JupyterLab's terminal widget renames itself ("Terminal s1", or what the
  // program sets), and the panel follows its content: the name stays ours.
  const label = trans.__(
    '%1 of %2 (read-only)',
    session.instance,
    session.owner
  );
  const keepLabel = () => {
    if (terminal.title.label !== label) {
      terminal.title.label = label;
    }
  };
  terminal.title.changed.connect(keepLabel);
  keepLabel();

  const status = new Widget();
  status.addClass('jp-ToolTerminal-status');
  status.addClass('jp-mod-ended');
  status.node.setAttribute('role', 'status');
  status.hide();
  panel.contentHeader.addWidget(status);
  // The first reason given stays: the server says why before it closes.
  const ended = (message: string) => {
    if (status.isHidden) {
      status.node.textContent = message;
      status.show();
    }
  };
  connection.errorReceived.connect((_, message) => ended(message));
  connection.ended.connect(() => ended(trans.__('The session is over.')));
  connection.connectionLost.connect(() =>
    ended(trans.__('The connection to the shared terminal was lost.'))
  );
  panel.disposed.connect(() => connection.dispose());
  return panel;
}

/**
 * The description of a command without arguments.
 */
const NO_ARGS = { args: { type: 'object' as const, properties: {} } };

/**
 * The namespace of the observer panels' tracker (and layout restoration).
 */
const TRACKER_NAMESPACE = 'tool-terminal-observer';

/**
 * The observer plugin: its three commands, in the palette and (share, stop
 * sharing) the panel's context menus, and the tracker of observer panels.
 */
export const observePlugin: JupyterFrontEndPlugin<void> = {
  id: `${EXTENSION_ID}:observe`,
  description:
    'Share a tool terminal read-only (and stop sharing it), and watch shared ones.',
  autoStart: true,
  requires: [IToolTerminalTracker],
  optional: [ICommandPalette, ITranslator, ISettingRegistry, ILayoutRestorer],
  activate: activateObserve
};

/**
 * Activate the observer plugin: its commands, the tracker of observer panels and their restoration.
 */
function activateObserve(
  app: JupyterFrontEnd,
  tracker: IToolTerminalTracker,
  palette: ICommandPalette | null,
  translator: ITranslator | null,
  settingRegistry: ISettingRegistry | null,
  restorer: ILayoutRestorer | null
): void {
  const trans = (translator ?? nullTranslator).load(TRANSLATION_DOMAIN);
  const serverSettings = toolTerminalSettings(
    app.serviceManager.serverSettings
  );
  const category = trans.__('Tool Terminals');
  // The user's terminal settings, in every observer panel too.
  const terminalOptions: Partial<ITerminal.IOptions> = {};
  const observers = new WidgetTracker<MainAreaWidget<Terminal>>({
    namespace: TRACKER_NAMESPACE
  });
  if (settingRegistry !== null) {
    followTerminalSettings(
      settingRegistry,
      null,
      terminalOptions,
      { ...DEFAULT_PREFERENCES },
      (key, value) => {
        if (!(key in OBSERVER_OPTIONS)) {
          observers.forEach(panel => panel.content.setOption(key, value));
        }
      }
    );
  }
  // A reload opens the views again whose sessions are still shared (the
  // open command fails for the others, and the restorer forgets them).
  if (restorer) {
    void restorer.restore(observers, {
      command: ObserveCommandIDs.observe,
      args: panel => ({
        session: panel.content.session.name,
        name: panel.id
      }),
      name: panel => panel.id
    });
  }
  const open = (session: IObservedSession, name?: string) => {
    const panel = createObserverPanel(
      session,
      serverSettings,
      translator ?? nullTranslator,
      terminalOptions
    );
    if (name !== undefined) {
      panel.id = name;
    }
    void observers.add(panel);
    app.shell.add(panel, 'main');
    app.shell.activateById(panel.id);
    return panel;
  };

  /**
   * A command body acting on the current panel's session: a failure is
   * shown under `failure`.
   */
  const onCurrentSession =
    (failure: string, act: (sessionId: string) => Promise<void>) =>
    async (): Promise<void> => {
      const sessionId = tracker.currentWidget?.content.sessionId;
      if (!sessionId) {
        return;
      }
      try {
        await act(sessionId);
      } catch (error) {
        await showErrorMessage(failure, error as Error);
      }
    };

  app.commands.addCommand(ObserveCommandIDs.share, {
    label: trans.__('Share Read-Only…'),
    caption: trans.__(
      'Let another user watch this terminal (they cannot type)'
    ),
    describedBy: NO_ARGS,
    isEnabled: () => !!tracker.currentWidget?.content.isLive,
    execute: onCurrentSession(
      trans.__('Could not share the terminal'),
      async sessionId => {
        const answer = await InputDialog.getText({
          title: trans.__('Share Read-Only'),
          label: trans.__('User name'),
          placeholder: trans.__('the user who may watch this terminal')
        });
        const user = answer.value?.trim();
        if (!answer.button.accept || !user) {
          return;
        }
        await shareReadOnly(sessionId, user, serverSettings);
        Notification.success(
          trans.__('%1 can now watch this terminal, read-only.', user)
        );
      }
    )
  });

  app.commands.addCommand(ObserveCommandIDs.unshare, {
    label: trans.__('Stop Sharing Read-Only…'),
    caption: trans.__('Stop letting a user watch this terminal'),
    describedBy: NO_ARGS,
    isEnabled: () => !!tracker.currentWidget?.content.isLive,
    execute: onCurrentSession(
      trans.__('Could not stop sharing the terminal'),
      async sessionId => {
        const users = await listObservers(sessionId, serverSettings);
        if (users.length === 0) {
          Notification.info(
            trans.__('This terminal is not shared with anyone.')
          );
          return;
        }
        const choice = await InputDialog.getItem({
          title: trans.__('Stop Sharing Read-Only'),
          label: trans.__('User name'),
          items: users
        });
        const user = choice.value;
        if (!choice.button.accept || user === null || !users.includes(user)) {
          return;
        }
        await stopSharing(sessionId, user, serverSettings);
        Notification.success(
          trans.__('%1 can no longer watch this terminal.', user)
        );
      }
    )
  });

  app.commands.addCommand(ObserveCommandIDs.observe, {
    label: trans.__('Watch a Shared Tool Terminal…'),
    caption: trans.__('Open a terminal another user shared with you'),
    describedBy: {
      args: {
        type: 'object',
        properties: {
          session: {
            type: 'string',
            description: trans.__(
              'A shared session to open (layout restoration)'
            )
          },
          name: {
            type: 'string',
            description: trans.__('The panel id (layout restoration)')
          }
        }
      }
    },
    execute: async args => {
      if (typeof args.session === 'string') {
        const restored = args.session;
        const name = typeof args.name === 'string' ? args.name : undefined;
        const session = (await listObserved(serverSettings)).find(
          s => s.id === restored
        );
        if (session === undefined) {
          throw new Error(
            trans.__('The terminal is no longer shared with you.')
          );
        }
        return open(session, name);
      }
      let shared: IObservedSession[];
      try {
        shared = await listObserved(serverSettings);
      } catch (error) {
        await showErrorMessage(
          trans.__('Could not list shared terminals'),
          error as Error
        );
        return;
      }
      if (shared.length === 0) {
        Notification.info(trans.__('No tool terminal is shared with you.'));
        return;
      }
      const labels = shared.map(s => trans.__('%1 of %2', s.instance, s.owner));
      const choice = await InputDialog.getItem({
        title: trans.__('Watch a Shared Tool Terminal'),
        items: labels
      });
      const index = choice.value === null ? -1 : labels.indexOf(choice.value);
      if (!choice.button.accept || index < 0) {
        return;
      }
      return open(shared[index]);
    }
  });

  // Its context menu entries (on the panel's body and tab) are in
  // schema/observe.json.
  palette?.addItem({ command: ObserveCommandIDs.share, category });
  palette?.addItem({ command: ObserveCommandIDs.unshare, category });
  palette?.addItem({ command: ObserveCommandIDs.observe, category });
}

/**
 * Module internals.
 */
namespace Private {
  /**
   * The session calls of an observer's connection: it never starts or
   * resets the owner's session, and shutting it down only closes the view.
   */
  export function watchOnly(
    serverSettings: ServerConnection.ISettings
  ): ToolTerminalConnection.ISessions {
    const refuse = () =>
      Promise.reject(new Error('A read-only view cannot change the session'));
    return {
      serverSettings,
      startNew: refuse,
      reset: refuse,
      shutdown: () => Promise.resolve()
    };
  }
}
