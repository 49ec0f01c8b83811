// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * Read-only views of tool terminals: the owner shares a session with another
 * user by name ("Share Read-Only…" on the panel), and that user opens it in an
 * observer panel ("Watch a Shared Tool Terminal…"), which shows the screen and
 * the live output and sends nothing.
 */

import type {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import {
  ICommandPalette,
  InputDialog,
  MainAreaWidget,
  Notification,
  showErrorMessage
} from '@jupyterlab/apputils';
import type { ServerConnection } from '@jupyterlab/services';
import type { Terminal as TerminalNS } from '@jupyterlab/services';
import { Terminal } from '@jupyterlab/terminal';
import { ITranslator, nullTranslator } from '@jupyterlab/translation';

import { requestAPI } from './api';
import { toolTerminalSettings } from './settings';
import { ToolTerminalConnection } from './connection';
import type { ISessionModel } from './tokens';
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
   * Open a session another user shared with the current user, read-only.
   */
  export const observe = 'tool-terminal:observe';
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

/**
 * Share session `sessionId` read-only with `user`; resolves to the users it
 * is now shared with.
 */
export function shareReadOnly(
  sessionId: string,
  user: string,
  serverSettings: ServerConnection.ISettings
): Promise<string[]> {
  return requestAPI<string[]>(
    `sessions/${encodeURIComponent(sessionId)}/observers`,
    serverSettings,
    { method: 'POST', body: JSON.stringify({ user }) }
  );
}

/**
 * The sessions other users shared with the current user.
 */
export async function listObserved(
  serverSettings: ServerConnection.ISettings
): Promise<IObservedSession[]> {
  const data = await requestAPI<unknown>(
    'sessions?role=observer',
    serverSettings
  );
  if (!Array.isArray(data)) {
    throw new Error('The server did not answer with a list of sessions.');
  }
  return data.filter(
    (item): item is IObservedSession =>
      typeof item?.id === 'string' &&
      typeof item?.owner === 'string' &&
      typeof item?.instance === 'string'
  );
}

/**
 * A connection that only receives: keystrokes and size changes of an
 * observer never leave the browser (the server would refuse them).
 */
export class ObserverConnection extends ToolTerminalConnection {
  /**
   * Drop the message: an observer does not type or resize.
   */
  send(message: TerminalNS.IMessage): void {
    void message;
  }
}

/**
 * A main-area panel with JupyterLab's terminal widget showing a shared
 * session, read-only; closing it leaves the owner's session alone.
 */
export function createObserverPanel(
  session: IObservedSession,
  serverSettings: ServerConnection.ISettings,
  translator: ITranslator = nullTranslator
): MainAreaWidget<Terminal> {
  const trans = translator.load(TRANSLATION_DOMAIN);
  const connection = new ObserverConnection({ session, serverSettings });
  const terminal = new Terminal(
    connection,
    { shutdownOnClose: false, closeOnExit: false, initialCommand: '' },
    translator
  );
  const panel = new MainAreaWidget({ content: terminal });
  panel.addClass('jp-ToolTerminal-observer');
  panel.title.label = trans.__(
    '%1 of %2 (read-only)',
    session.instance,
    session.owner
  );
  panel.disposed.connect(() => connection.dispose());
  return panel;
}

/**
 * The description of a command without arguments.
 */
const NO_ARGS = { args: { type: 'object' as const, properties: {} } };

/**
 * The observer plugin: the two commands, in the palette.
 */
export const observePlugin: JupyterFrontEndPlugin<void> = {
  id: `${EXTENSION_ID}:observe`,
  description: 'Share a tool terminal read-only, and watch shared ones.',
  autoStart: true,
  requires: [IToolTerminalTracker],
  optional: [ICommandPalette, ITranslator],
  activate: (
    app: JupyterFrontEnd,
    tracker: IToolTerminalTracker,
    palette: ICommandPalette | null,
    translator: ITranslator | null
  ): void => {
    const trans = (translator ?? nullTranslator).load(TRANSLATION_DOMAIN);
    const serverSettings = toolTerminalSettings(
      app.serviceManager.serverSettings
    );
    const category = trans.__('Tool Terminals');

    app.commands.addCommand(ObserveCommandIDs.share, {
      label: trans.__('Share Read-Only…'),
      caption: trans.__(
        'Let another user watch this terminal (they cannot type)'
      ),
      describedBy: NO_ARGS,
      isEnabled: () => !!tracker.currentWidget?.content.isLive,
      execute: async () => {
        const sessionId = tracker.currentWidget?.content.sessionId;
        if (!sessionId) {
          return;
        }
        const answer = await InputDialog.getText({
          title: trans.__('Share Read-Only'),
          label: trans.__('User name'),
          placeholder: trans.__('the user who may watch this terminal')
        });
        const user = answer.value?.trim();
        if (!answer.button.accept || !user) {
          return;
        }
        try {
          await shareReadOnly(sessionId, user, serverSettings);
          Notification.success(
            trans.__('%1 can now watch this terminal, read-only.', user)
          );
        } catch (error) {
          await showErrorMessage(
            trans.__('Could not share the terminal'),
            error as Error
          );
        }
      }
    });

    app.commands.addCommand(ObserveCommandIDs.observe, {
      label: trans.__('Watch a Shared Tool Terminal…'),
      caption: trans.__('Open a terminal another user shared with you'),
      describedBy: NO_ARGS,
      execute: async () => {
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
        const labels = shared.map(s =>
          trans.__('%1 of %2', s.instance, s.owner)
        );
        const choice = await InputDialog.getItem({
          title: trans.__('Watch a Shared Tool Terminal'),
          items: labels
        });
        const index = choice.value === null ? -1 : labels.indexOf(choice.value);
        if (!choice.button.accept || index < 0) {
          return;
        }
        const panel = createObserverPanel(
          shared[index],
          serverSettings,
          translator ?? nullTranslator
        );
        app.shell.add(panel, 'main');
        app.shell.activateById(panel.id);
      }
    });

    // On the panel itself: its body's and its tab's context menus.
    app.contextMenu.addItem({
      command: ObserveCommandIDs.share,
      selector: '.jp-ToolTerminal',
      rank: 5
    });
    app.contextMenu.addItem({
      command: ObserveCommandIDs.share,
      // TAB_CLASS of ./commands (this plugin module does not import it:
      // jupyter/prefer-lazy-imports).
      selector: '.lm-DockPanel-tabBar .jp-ToolTerminal-tab',
      rank: 13
    });
    palette?.addItem({ command: ObserveCommandIDs.share, category });
    palette?.addItem({ command: ObserveCommandIDs.observe, category });
  }
};
