// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import type { JupyterFrontEnd } from '@jupyterlab/application';
import type { MainAreaWidget } from '@jupyterlab/apputils';
import { WidgetTracker } from '@jupyterlab/apputils';
import { acceptDialog, waitForDialog } from '@jupyterlab/testutils';
import { CommandRegistry } from '@lumino/commands';
import type { Widget } from '@lumino/widgets';

import { addCommands } from '../commands';
import { ToolInstances } from '../instances';
import type { IToolTerminal } from '../tokens';
import { CommandIDs } from '../tokens';
import type { IFakeAnswer } from './helpers';
import {
  FakeWebSocket,
  instanceModel,
  makeSessions,
  makeSettings,
  pathOf,
  quietCanvas,
  sessionModel
} from './helpers';

/**
 * The commands on an application whose shell records what it is given.
 */
async function setUp(answers: IFakeAnswer[]) {
  const made = makeSettings(answers);
  const commands = new CommandRegistry();
  const added: Widget[] = [];
  const app = {
    commands,
    shell: {
      add: (widget: Widget) => added.push(widget),
      activateById: () => undefined
    },
    contextMenuHitTest: () => undefined
  } as unknown as JupyterFrontEnd;
  const tracker = new WidgetTracker<MainAreaWidget<IToolTerminal>>({
    namespace: `test-${Math.random()}`
  });
  const instances = new ToolInstances({
    serverSettings: made.settings,
    auto: false
  });
  addCommands(app, tracker, instances, {
    sessions: makeSessions(made.settings),
    terminalOptions: {}
  });
  const dialogText = () =>
    document.body.querySelector('.jp-Dialog')?.textContent ?? '';
  return { ...made, commands, added, instances, tracker, dialogText };
}

describe('addCommands', () => {
  beforeAll(quietCanvas);

  beforeEach(() => {
    FakeWebSocket.instances = [];
  });

  it('the picker says why when the engine cannot be reached', async () => {
    const message = 'The Docker Engine cannot be reached.';
    const t = await setUp([{ status: 503, body: { message } }]);
    const done = t.commands.execute(CommandIDs.open, {});
    await waitForDialog();
    expect(t.dialogText()).toContain(message);
    expect(t.dialogText()).not.toContain('no running tool instance');
    await acceptDialog();
    await done;
    expect(t.added).toEqual([]);
    t.instances.dispose();
  });

  it('a stopped instance opens no tab; the click says it is stopped', async () => {
    const t = await setUp([
      { status: 200, body: [instanceModel('pg-1', 'exited')] }
    ]);
    await t.instances.refresh();
    expect(t.commands.caption(CommandIDs.open, { instance: 'pg-1' })).toContain(
      'is exited'
    );
    const done = t.commands.execute(CommandIDs.open, { instance: 'pg-1' });
    await waitForDialog();
    // Its state said once, not "(pg-1, exited) is exited".
    expect(t.dialogText()).toContain('PostgreSQL (pg-1) is exited');
    await acceptDialog();
    await done;
    expect(t.added).toEqual([]);
    expect(t.requests).toHaveLength(1);
    t.instances.dispose();
  });

  it('a restored panel opens even on a stopped instance, and says so', async () => {
    const t = await setUp([
      { status: 200, body: [instanceModel('pg-1', 'exited')] },
      { status: 200, body: [] },
      { status: 200, body: [instanceModel('pg-1', 'exited')] }
    ]);
    await t.instances.refresh();
    const widget = (await t.commands.execute(CommandIDs.open, {
      instance: 'pg-1',
      session: 's1',
      name: 'tool-terminal-restored'
    })) as MainAreaWidget<IToolTerminal>;
    expect(t.added).toEqual([widget]);
    expect(widget.id).toBe('tool-terminal-restored');
    // Display name first in the tab, the rest in its tooltip.
    expect(widget.title.label).toBe('PostgreSQL');
    expect(widget.title.caption).toContain('pg-1');
    expect(widget.content.node.textContent).toContain(
      'The tool instance pg-1 is exited'
    );
    expect(t.requests.map(r => pathOf(r).split('/api/')[1])).toEqual([
      'instances',
      'sessions',
      'instances'
    ]);
    widget.dispose();
    t.instances.dispose();
  });

  it('numbers the tabs of panels on one instance, and keeps their names', async () => {
    const t = await setUp([
      { status: 200, body: [instanceModel('pg-1')] },
      { status: 201, body: sessionModel('s1') },
      { status: 201, body: sessionModel('s2') },
      { status: 200, body: [] }
    ]);
    await t.instances.refresh();
    const open = async () =>
      (await t.commands.execute(CommandIDs.open, {
        instance: 'pg-1'
      })) as MainAreaWidget<IToolTerminal>;
    const first = await open();
    expect(first.title.label).toBe('PostgreSQL');
    const second = await open();
    expect([first.title.label, second.title.label]).toEqual([
      'PostgreSQL (1)',
      'PostgreSQL (2)'
    ]);
    expect(second.title.caption).toContain('Terminal 2 in tool instance pg-1');
    // The instance removed: the tabs keep its display name.
    await t.instances.refresh();
    expect(second.title.label).toBe('PostgreSQL (2)');
    first.dispose();
    expect(second.title.label).toBe('PostgreSQL');
    second.dispose();
    t.instances.dispose();
  });

  it('opens a panel with a new session from a tile', async () => {
    const t = await setUp([
      { status: 200, body: [instanceModel('pg-1')] },
      { status: 201, body: sessionModel('s1') }
    ]);
    await t.instances.refresh();
    const widget = (await t.commands.execute(CommandIDs.open, {
      instance: 'pg-1'
    })) as MainAreaWidget<IToolTerminal>;
    expect(widget.content.sessionId).toBe('s1');
    expect(t.tracker.has(widget)).toBe(true);
    widget.dispose();
    t.instances.dispose();
  });

  it('disabled commands say why', async () => {
    const t = await setUp([]);
    for (const id of [CommandIDs.reset, CommandIDs.restart, CommandIDs.close]) {
      expect(t.commands.isEnabled(id, {})).toBe(false);
      expect(t.commands.caption(id, {})).toBe('Open a tool terminal first');
    }
    t.instances.dispose();
  });
});
