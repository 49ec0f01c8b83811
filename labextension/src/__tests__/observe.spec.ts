// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import type { JupyterFrontEnd } from '@jupyterlab/application';
import { Notification } from '@jupyterlab/apputils';
import { acceptDialog, waitForDialog } from '@jupyterlab/testutils';
import { CommandRegistry } from '@lumino/commands';
import { Widget } from '@lumino/widgets';

import {
  listObserved,
  listObservers,
  shareReadOnly,
  stopSharing
} from '../api';
import {
  createObserverPanel,
  ObserveCommandIDs,
  ObserverConnection,
  observePlugin
} from '../observe';
import { toolTerminalSettings } from '../settings';
import type { IToolTerminalTracker } from '../tokens';
import type { IFakeAnswer } from './helpers';
import {
  answerLoginFrame,
  FakeWebSocket,
  makeSettings,
  pathOf,
  quietCanvas,
  sessionModel
} from './helpers';

/**
 * The observer plugin activated on an application with a live tool terminal
 * of session `s1` as the current panel.
 */
function activate(answers: IFakeAnswer[], restorer: unknown = null) {
  const made = makeSettings(answers);
  const commands = new CommandRegistry();
  const added: Widget[] = [];
  const app = {
    commands,
    contextMenu: { addItem: () => undefined },
    serviceManager: { serverSettings: made.settings },
    shell: {
      add: (widget: Widget) => added.push(widget),
      activateById: () => undefined
    }
  } as unknown as JupyterFrontEnd;
  const tracker = {
    currentWidget: { content: { isLive: true, sessionId: 's1' } }
  } as unknown as IToolTerminalTracker;
  observePlugin.activate(app, tracker, null, null, null, restorer);
  return { ...made, commands, added };
}

/**
 * An observer panel of session `s1`, attached, its socket open unless
 * `open` is false.
 */
function observerPanel(open = true, terminalOptions = {}) {
  const { settings } = makeSettings();
  const panel = createObserverPanel(
    { ...sessionModel('s1'), owner: 'alice' },
    settings,
    undefined,
    terminalOptions
  );
  Widget.attach(panel, document.body);
  const socket = FakeWebSocket.last;
  if (open) {
    socket.open();
  }
  const status = () => {
    const node = panel.node.querySelector('.jp-ToolTerminal-status');
    return node?.classList.contains('lm-mod-hidden') ? null : node?.textContent;
  };
  return { panel, socket, status };
}

describe('observe', () => {
  beforeAll(quietCanvas);

  beforeEach(() => {
    FakeWebSocket.instances = [];
  });

  it('shares a session with a user by name', async () => {
    const { settings, requests } = makeSettings([
      { status: 201, body: ['bob'] }
    ]);
    await expect(shareReadOnly('s/1', 'bob', settings)).resolves.toEqual([
      'bob'
    ]);
    expect(requests[0].method).toBe('POST');
    expect(pathOf(requests[0])).toBe(
      '/user/alice/tool-terminal/api/sessions/s%2F1/observers'
    );
    expect(JSON.parse(requests[0].body)).toEqual({ user: 'bob' });
  });

  it("rejects with the server's message", async () => {
    const { settings } = makeSettings([
      {
        status: 409,
        body: { message: 'The terminal is already shared with bob.' }
      }
    ]);
    await expect(shareReadOnly('s1', 'bob', settings)).rejects.toThrow(
      'already shared'
    );
  });

  it('lists the sessions shared with the user, dropping malformed items', async () => {
    const shared = { ...sessionModel('s2'), owner: 'alice', role: 'observer' };
    const { settings, requests } = makeSettings([
      { status: 200, body: [shared, { id: 'x' }, null] }
    ]);
    await expect(listObserved(settings)).resolves.toEqual([shared]);
    expect(requests[0].url).toContain('sessions?role=observer');
  });

  it('an observer connection receives but never sends', () => {
    const { settings } = makeSettings();
    const connection = new ObserverConnection({
      session: sessionModel('s1'),
      serverSettings: settings
    });
    const socket = FakeWebSocket.last;
    socket.open();
    connection.send({ type: 'stdin', content: ['rm -rf ~\r'] });
    connection.send({ type: 'set_size', content: [10, 20] });
    const received: unknown[] = [];
    connection.messageReceived.connect((_, message) => received.push(message));
    socket.receive(['stdout', 'hello']);
    expect(socket.sent).toEqual([]);
    expect(received).toEqual([{ type: 'stdout', content: ['hello'] }]);
    connection.dispose();
  });

  it('logs in for the WebSockets of a Hub service before listing what is shared', async () => {
    // An observer may never have opened a tool terminal of their own: their
    // page has no login cookie of the service yet.
    const { settings: base, requests } = makeSettings(
      [{ status: 200, body: [] }],
      { token: 'hub-token' }
    );
    const settings = toolTerminalSettings(base, '/services/watched/');
    const listing = listObserved(settings);
    const frame = await answerLoginFrame({ user: 'bob', xsrf: 'x' });
    await listing;
    expect(new URL(frame).pathname).toBe(
      '/services/watched/tool-terminal/login'
    );
    expect(requests.map(r => `${r.method} ${pathOf(r)}`)).toEqual([
      'GET /services/watched/tool-terminal/api/sessions'
    ]);
  });

  it('lists the users a session is shared with, and stops sharing with one', async () => {
    const { settings, requests } = makeSettings([
      { status: 200, body: ['bob', 7, 'carol'] },
      { status: 204 }
    ]);
    await expect(listObservers('s/1', settings)).resolves.toEqual([
      'bob',
      'carol'
    ]);
    await expect(stopSharing('s/1', 'b b', settings)).resolves.toBe(undefined);
    expect(requests.map(r => [r.method, pathOf(r)])).toEqual([
      ['GET', '/user/alice/tool-terminal/api/sessions/s%2F1/observers'],
      ['DELETE', '/user/alice/tool-terminal/api/sessions/s%2F1/observers/b%20b']
    ]);
  });

  it('"Share Read-Only…" says whether it worked', async () => {
    const { commands, requests } = activate([
      { status: 201, body: ['bob'] },
      { status: 404, body: { message: 'There is no user nobody.' } }
    ]);
    // Type a user name in the dialog the command opens, and accept it.
    const answer = async (user: string) => {
      await waitForDialog();
      document.querySelector<HTMLInputElement>('.jp-Dialog input')!.value =
        user;
      await acceptDialog();
    };
    const before = Notification.manager.count;
    await Promise.all([
      commands.execute(ObserveCommandIDs.share),
      answer(' bob ')
    ]);
    expect(Notification.manager.count).toBe(before + 1);
    const told = Notification.manager.notifications[0];
    expect(told.type).toBe('success');
    expect(told.message).toBe('bob can now watch this terminal, read-only.');
    // A refusal is shown, with the server's reason, in a dialog of its own.
    const failed = commands.execute(ObserveCommandIDs.share);
    await answer('bob');
    const shown = () => document.querySelector('.jp-Dialog')?.textContent ?? '';
    for (let i = 0; i < 500 && !shown().includes('Could not share'); i++) {
      await new Promise(resolve => setTimeout(resolve, 10));
    }
    expect(shown()).toContain('Could not share the terminal');
    expect(shown()).toContain('There is no user nobody.');
    await acceptDialog();
    await failed;
    expect(Notification.manager.count).toBe(before + 1);
    expect(requests.map(r => [r.method, JSON.parse(r.body)])).toEqual([
      ['POST', { user: 'bob' }],
      ['POST', { user: 'bob' }]
    ]);
  });

  it('"Stop Sharing Read-Only…" asks whom, then revokes that user', async () => {
    const { commands, requests } = activate([
      { status: 200, body: ['bob', 'carol'] },
      { status: 204 }
    ]);
    expect(commands.label(ObserveCommandIDs.unshare)).toBe(
      'Stop Sharing Read-Only…'
    );
    expect(commands.isEnabled(ObserveCommandIDs.unshare)).toBe(true);
    const done = commands.execute(ObserveCommandIDs.unshare);
    await waitForDialog();
    const options = [...document.querySelectorAll('.jp-Dialog option')];
    expect(options.map(o => o.textContent)).toEqual(['bob', 'carol']);
    await acceptDialog();
    await done;
    expect(requests.map(r => [r.method, pathOf(r)])).toEqual([
      ['GET', '/user/alice/tool-terminal/api/sessions/s1/observers'],
      ['DELETE', '/user/alice/tool-terminal/api/sessions/s1/observers/bob']
    ]);
  });

  it('"Stop Sharing Read-Only…" asks nothing when no one watches', async () => {
    const { commands, requests } = activate([{ status: 200, body: [] }]);
    await commands.execute(ObserveCommandIDs.unshare);
    expect(document.querySelector('.jp-Dialog')).toBeNull();
    expect(requests.map(r => r.method)).toEqual(['GET']);
  });

  it('tracks observer panels and reopens a shared one after a reload', async () => {
    const shared = { ...sessionModel('s2'), owner: 'bob' };
    const restore = jest.fn();
    const { commands, added, requests } = activate(
      [
        { status: 200, body: [shared] },
        { status: 200, body: [] }
      ],
      { restore }
    );
    expect(restore).toHaveBeenCalledTimes(1);
    const [observers, options] = restore.mock.calls[0];
    expect(options.command).toBe(ObserveCommandIDs.observe);
    const panel = (await commands.execute(ObserveCommandIDs.observe, {
      session: 's2',
      name: 'observer-1'
    })) as Widget;
    expect(added).toEqual([panel]);
    expect(panel.id).toBe('observer-1');
    expect(panel.title.label).toBe('pg-1 of bob (read-only)');
    expect(observers.has(panel)).toBe(true);
    expect(options.args(panel)).toEqual({
      session: 's2',
      name: 'observer-1'
    });
    expect(FakeWebSocket.last.url).toMatch(/\/websocket\/s2$/);
    // No longer shared: the command fails, and the restorer forgets it.
    await expect(
      commands.execute(ObserveCommandIDs.observe, { session: 's2' })
    ).rejects.toThrow('no longer shared');
    expect(added).toHaveLength(1);
    expect(requests.map(r => r.url)).toEqual([
      expect.stringContaining('sessions?role=observer'),
      expect.stringContaining('sessions?role=observer')
    ]);
    panel.dispose();
    expect(observers.has(panel)).toBe(false);
  });

  it('an observer panel says why the owner ended the view, and does not retry', () => {
    jest.useFakeTimers();
    try {
      const { panel, socket, status } = observerPanel();
      expect(panel.title.label).toBe('pg-1 of alice (read-only)');
      // As JupyterLab's terminal widget does once connected.
      panel.content.title.label = 'Terminal s1';
      expect(panel.title.label).toBe('pg-1 of alice (read-only)');
      expect(status()).toBeNull();
      socket.receive(['stdout', 'hello']);
      socket.receive(['error', 'The owner stopped sharing this terminal.']);
      socket.drop(1008);
      jest.runOnlyPendingTimers();
      expect(status()).toBe('The owner stopped sharing this terminal.');
      expect(FakeWebSocket.instances).toHaveLength(1);
      panel.dispose();
    } finally {
      jest.useRealTimers();
    }
  });

  it("an observer panel follows the user's terminal settings, not in closing", () => {
    const { panel } = observerPanel(true, {
      screenReaderMode: true,
      fontSize: 17,
      shutdownOnClose: true
    });
    expect(panel.content.getOption('screenReaderMode')).toBe(true);
    expect(panel.content.getOption('fontSize')).toBe(17);
    expect(panel.content.getOption('shutdownOnClose')).toBe(false);
    panel.dispose();
  });

  it('an observer panel says when the session is over or the connection lost', () => {
    const ended = observerPanel();
    ended.socket.receive(['disconnect', 1]);
    ended.socket.drop(1000);
    expect(ended.status()).toBe('The session is over.');
    ended.panel.dispose();

    // The upgrade refused (the view was revoked while it opened).
    const refused = observerPanel(false);
    refused.socket.fail();
    expect(refused.status()).toBe(
      'The connection to the shared terminal was lost.'
    );
    refused.panel.dispose();
  });
});
