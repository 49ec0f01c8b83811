// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import type { ILauncher } from '@jupyterlab/launcher';
import type { ServerConnection } from '@jupyterlab/services';
import { nullTranslator } from '@jupyterlab/translation';
import type { LabIcon } from '@jupyterlab/ui-components';
import { CommandRegistry } from '@lumino/commands';
import { Signal } from '@lumino/signaling';

import { listSessions } from '../api';
import { instanceLabel, ToolInstances } from '../instances';
import { restoreArgs, sessionArg } from '../restorer';
import { RunningToolTerminals } from '../running';
import {
  addSectionIcon,
  CATEGORY_RANK,
  LauncherTiles,
  SECTION_ICON_CLASS
} from '../tiles';
import { toolIcon } from '../icons';
import type { IToolTerminalTracker } from '../tokens';
import { CommandIDs } from '../tokens';
import type { IFakeAnswer } from './helpers';
import {
  instanceModel,
  makeSessions,
  makeSettings,
  pathOf,
  sessionModel
} from './helpers';

const trans = nullTranslator.load('jupyter-tool-terminal');
const CATEGORY = trans.__('Tool Terminals');

/**
 * A setup note as `GET /tool-terminal/api/status` sends it.
 */
const NOTE = {
  kind: 'no-tool-types',
  message: 'No tool types are configured on this server.',
  help: 'https://example.org/readme#tool-instances-and-tool-types'
};

/**
 * Tiles on a recording launcher, following an instance model that gets
 * `answers`.
 */
function makeTiles(answers: IFakeAnswer[]) {
  const made = makeInstances(answers);
  const launcher = fakeLauncher();
  const tiles = new LauncherTiles({
    launcher,
    instances: made.instances,
    category: CATEGORY
  });
  return { ...made, launcher, tiles };
}

function makeInstances(answers: IFakeAnswer[]) {
  const made = makeSettings(answers);
  const instances = new ToolInstances({
    serverSettings: made.settings,
    auto: false
  });
  return { ...made, instances };
}

/**
 * A launcher that records its items.
 */
function fakeLauncher() {
  const items: ILauncher.IItemOptions[] = [];
  return {
    items,
    add(item: ILauncher.IItemOptions) {
      items.push(item);
      return {
        isDisposed: false,
        dispose() {
          const index = items.indexOf(item);
          if (index >= 0) {
            items.splice(index, 1);
          }
        }
      };
    }
  };
}

/**
 * A Running panel section whose tracker announces panels on `widgetAdded`
 * (a test emits fake panels there).
 */
function followingPanels(serverSettings: ServerConnection.ISettings) {
  const widgetAdded = new Signal<unknown, unknown>({});
  const tracker = {
    find: () => undefined,
    forEach: () => undefined,
    widgetAdded
  } as unknown as IToolTerminalTracker;
  const instances = new ToolInstances({ serverSettings, auto: false });
  const running = new RunningToolTerminals({
    sessions: makeSessions(serverSettings),
    tracker,
    instances,
    commands: new CommandRegistry(),
    trans
  });
  return { widgetAdded, running, instances };
}

describe('api: session lookups', () => {
  it('lists the sessions, dropping malformed items', async () => {
    const { settings, requests } = makeSettings([
      { status: 200, body: [sessionModel('s1'), { id: '' }, 'x'] }
    ]);
    await expect(listSessions(settings)).resolves.toEqual([sessionModel('s1')]);
    expect(pathOf(requests[0])).toBe('/user/alice/tool-terminal/api/sessions');
  });
});

describe('restorer', () => {
  const widget = (sessionId: string | null, endMessage: string | null = null) =>
    ({
      id: 'tool-terminal-1',
      content: { instanceId: 'pg-1', sessionId, endMessage }
    }) as never;

  it('saves the instance, the panel id and the session', () => {
    expect(restoreArgs(widget('s1'))).toEqual({
      instance: 'pg-1',
      name: 'tool-terminal-1',
      session: 's1'
    });
  });

  it('never saves an empty session id', () => {
    expect(restoreArgs(widget(null))).toEqual({
      instance: 'pg-1',
      name: 'tool-terminal-1'
    });
    expect(restoreArgs(widget(''))).not.toHaveProperty('session');
  });

  it('saves how the session ended, once it did', () => {
    expect(
      restoreArgs(widget('s1', 'The tool instance pg-1 stopped.'))
    ).toEqual({
      instance: 'pg-1',
      name: 'tool-terminal-1',
      session: 's1',
      ended: 'The tool instance pg-1 stopped.'
    });
  });

  it('takes only a non-empty string for a session', () => {
    expect(sessionArg({ session: 's1' })).toBe('s1');
    expect(sessionArg({ session: '' })).toBeUndefined();
    expect(sessionArg({ session: 3 })).toBeUndefined();
    expect(sessionArg({})).toBeUndefined();
  });
});

describe('ToolInstances', () => {
  it('lists the instances and signals a change once', async () => {
    const t = makeInstances([
      { status: 200, body: [instanceModel('pg-1')] },
      { status: 200, body: [instanceModel('pg-1')] }
    ]);
    let changes = 0;
    t.instances.changed.connect(() => changes++);
    await t.instances.refresh();
    await t.instances.refresh();
    expect(t.instances.list.map(i => i.id)).toEqual(['pg-1']);
    expect(t.instances.get('pg-1')?.status).toBe('running');
    expect(t.instances.error).toBeNull();
    expect(changes).toBe(1);
    t.instances.dispose();
  });

  it("keeps the server's message when the engine is unreachable", async () => {
    const message =
      'The Docker Engine cannot be reached at unix:///var/run/docker.sock.';
    const t = makeInstances([{ status: 503, body: { message } }]);
    await t.instances.refresh();
    expect(t.instances.error).toBe(message);
    expect(t.instances.list).toEqual([]);
    t.instances.dispose();
  });

  it('shares one request between concurrent refreshes', async () => {
    const t = makeInstances([{ status: 200, body: [] }]);
    await Promise.all([t.instances.refresh(), t.instances.refresh()]);
    expect(t.requests.map(pathOf)).toEqual([
      '/user/alice/tool-terminal/api/instances',
      // An empty list: the server says why (GET status).
      '/user/alice/tool-terminal/api/status'
    ]);
    t.instances.dispose();
  });

  it('asks the server why when it lists no instance, and only then', async () => {
    const note = NOTE;
    const t = makeInstances([
      { status: 200, body: [] },
      { status: 200, body: { runtime: 'docker', notes: [note, { kind: 1 }] } },
      { status: 200, body: [instanceModel('a')] }
    ]);
    await t.instances.refresh();
    expect(t.instances.notes).toEqual([note]);
    await t.instances.refresh();
    expect(t.instances.notes).toEqual([]);
    expect(t.requests).toHaveLength(3);
    t.instances.dispose();
  });

  it('labels an instance by its display name first, and its state', () => {
    expect(instanceLabel('pg-1', instanceModel('pg-1'), trans)).toBe(
      'PostgreSQL (pg-1)'
    );
    expect(instanceLabel('pg-1', instanceModel('pg-1', 'exited'), trans)).toBe(
      'PostgreSQL (pg-1, exited)'
    );
    expect(instanceLabel('pg-1', undefined, trans)).toBe('pg-1');
  });
});

describe('LauncherTiles', () => {
  it("heads the section with the extension's icon, on a card before the tiles", () => {
    const launcher = fakeLauncher();
    const commands = new CommandRegistry();
    const trans = nullTranslator.load('test');
    const category = trans.__('Tool Terminals');
    const added = addSectionIcon(commands, launcher, category);
    expect(launcher.items).toHaveLength(1);
    const [card] = launcher.items;
    expect(card).toMatchObject({
      category,
      categoryRank: CATEGORY_RANK,
      rank: -1
    });
    const icon = commands.icon(card.command, {}) as LabIcon;
    expect(icon.name).toBe('jupyter-tool-terminal:tool-terminals');
    // (The class that hides the card, not the section's header.)
    expect(icon.element().classList).toContain(SECTION_ICON_CLASS);
    // Not any tool type's icon (nor JupyterLab's terminal icon).
    expect(icon.name).not.toBe(toolIcon('', null).name);
    added.dispose();
    expect(launcher.items).toEqual([]);
    expect(commands.hasCommand(card.command)).toBe(false);
  });

  it("adds one tile per instance, next to JupyterLab's Terminal", async () => {
    const { launcher, tiles, ...t } = makeTiles([
      { status: 200, body: [instanceModel('a'), instanceModel('b', 'exited')] }
    ]);
    await t.instances.refresh();
    expect(tiles.keys).toEqual(['a', 'b']);
    expect(launcher.items).toEqual([
      {
        command: CommandIDs.open,
        args: { instance: 'a' },
        category: CATEGORY,
        categoryRank: CATEGORY_RANK,
        rank: 0
      },
      {
        command: CommandIDs.open,
        args: { instance: 'b' },
        category: CATEGORY,
        categoryRank: CATEGORY_RANK,
        rank: 1
      }
    ]);
    tiles.dispose();
    expect(launcher.items).toEqual([]);
    t.instances.dispose();
  });

  it('removes the tiles of instances gone and keeps the others', async () => {
    const { launcher, tiles, ...t } = makeTiles([
      { status: 200, body: [instanceModel('a'), instanceModel('b')] },
      { status: 200, body: [instanceModel('a')] }
    ]);
    await t.instances.refresh();
    const first = launcher.items[0];
    await t.instances.refresh();
    expect(tiles.keys).toEqual(['a']);
    expect(launcher.items).toHaveLength(1);
    expect(launcher.items[0]).toBe(first);
    tiles.dispose();
    t.instances.dispose();
  });

  it('shows one tile that says why when the instances cannot be listed', async () => {
    const { launcher, tiles, ...t } = makeTiles([
      { status: 200, body: [instanceModel('a')] },
      { status: 503, body: { message: 'The engine is down.' } },
      { status: 200, body: { notes: [] } },
      { status: 200, body: [instanceModel('a')] }
    ]);
    await t.instances.refresh();
    await t.instances.refresh();
    expect(tiles.keys).toEqual(['']);
    expect(launcher.items).toHaveLength(1);
    expect(launcher.items[0].command).toBe(CommandIDs.refresh);
    expect(launcher.items[0].args).toEqual({ launcher: true });
    await t.instances.refresh();
    expect(tiles.keys).toEqual(['a']);
    tiles.dispose();
    t.instances.dispose();
  });
});

describe('LauncherTiles: state and reasons', () => {
  it('replaces a tile when its instance changes state, so the launcher shows it', async () => {
    const { launcher, tiles, ...t } = makeTiles([
      { status: 200, body: [instanceModel('a'), instanceModel('b')] },
      { status: 200, body: [instanceModel('a', 'exited'), instanceModel('b')] },
      { status: 200, body: [instanceModel('a'), instanceModel('b')] }
    ]);
    await t.instances.refresh();
    const [a, b] = launcher.items;
    await t.instances.refresh();
    expect(launcher.items).toContain(b);
    expect(launcher.items).not.toContain(a);
    const exited = launcher.items.find(item => item !== b);
    await t.instances.refresh();
    expect(launcher.items).toContain(b);
    expect(launcher.items).not.toContain(exited);
    expect(tiles.keys.sort()).toEqual(['a', 'b']);
    tiles.dispose();
    t.instances.dispose();
  });

  it('shows a tile that says why when the server lists none and says why', async () => {
    const note = { ...NOTE, help: '' };
    const { launcher, tiles, ...t } = makeTiles([
      { status: 200, body: [] },
      { status: 200, body: { notes: [note] } },
      { status: 200, body: [] },
      { status: 200, body: { notes: [] } }
    ]);
    await t.instances.refresh();
    expect(tiles.keys).toEqual(['']);
    expect(launcher.items[0].command).toBe(CommandIDs.refresh);
    await t.instances.refresh();
    expect(tiles.keys).toEqual([]);
    tiles.dispose();
    t.instances.dispose();
  });
});

describe('RunningToolTerminals', () => {
  function makeRunning(answers: IFakeAnswer[]) {
    const made = makeSettings(answers);
    const panels: { content: { sessionId: string } }[] = [];
    const tracker = {
      find: (fn: (w: unknown) => boolean) => panels.find(fn),
      forEach: () => undefined,
      widgetAdded: { connect: () => true },
      currentChanged: { connect: () => true }
    } as unknown as IToolTerminalTracker;
    const commands = new CommandRegistry();
    const opened: unknown[] = [];
    commands.addCommand(CommandIDs.open, {
      execute: args => {
        opened.push(args);
      }
    });
    const instances = new ToolInstances({
      serverSettings: made.settings,
      auto: false
    });
    const running = new RunningToolTerminals({
      sessions: makeSessions(made.settings),
      tracker,
      instances,
      commands,
      trans
    });
    return { ...made, running, opened, instances };
  }

  it("marks an agent's session with the agent's name", async () => {
    const t = makeRunning([
      {
        status: 200,
        body: [
          { ...sessionModel('s1'), agent: { id: 'a1', name: 'claude' } },
          sessionModel('s2', 'pg-2')
        ]
      }
    ]);
    await t.running.refresh();
    const items = t.running.running();
    expect(items.map(i => i.label())).toEqual(['pg-1 — agent: claude', 'pg-2']);
    expect(items[0].labelTitle!()).toContain('agent claude');
    t.running.dispose();
    t.instances.dispose();
  });

  it('numbers the terminals of one instance, oldest first', async () => {
    const t = makeRunning([
      {
        status: 200,
        body: [
          { ...sessionModel('s2'), created: '2026-01-01T00:00:02Z' },
          { ...sessionModel('s1'), created: '2026-01-01T00:00:01Z' },
          sessionModel('s3', 'pg-2')
        ]
      }
    ]);
    await t.running.refresh();
    expect(t.running.running().map(i => i.label())).toEqual([
      'pg-1 (2)',
      'pg-1 (1)',
      'pg-2'
    ]);
    t.running.dispose();
    t.instances.dispose();
  });

  it('lists the sessions and signals a change', async () => {
    const t = makeRunning([
      { status: 200, body: [sessionModel('s1'), sessionModel('s2', 'pg-2')] }
    ]);
    let changes = 0;
    t.running.runningChanged.connect(() => changes++);
    await t.running.refresh();
    expect(changes).toBe(1);
    const items = t.running.running();
    expect(items.map(i => i.label())).toEqual(['pg-1', 'pg-2']);
    expect(items[0].labelTitle!()).toContain('pg-1');
    t.running.dispose();
    t.instances.dispose();
  });

  it('opens a panel reattached to a session without one', async () => {
    const t = makeRunning([{ status: 200, body: [sessionModel('s1')] }]);
    await t.running.refresh();
    t.running.running()[0].open!();
    await new Promise(resolve => setTimeout(resolve, 0));
    expect(t.opened).toEqual([
      {
        instance: 'pg-1',
        session: 's1',
        name: 'tool-terminal-s1'
      }
    ]);
    t.running.dispose();
    t.instances.dispose();
  });

  it('shuts a session down (DELETE) and lists again', async () => {
    const t = makeRunning([
      { status: 200, body: [sessionModel('s1')] },
      { status: 204 },
      { status: 200, body: [] }
    ]);
    await t.running.refresh();
    await t.running.running()[0].shutdown!();
    expect(t.requests.map(r => `${r.method} ${pathOf(r)}`)).toEqual([
      'GET /user/alice/tool-terminal/api/sessions',
      'DELETE /user/alice/tool-terminal/api/sessions/s1',
      'GET /user/alice/tool-terminal/api/sessions'
    ]);
    expect(t.running.sessions).toEqual([]);
    t.running.dispose();
    t.instances.dispose();
  });

  it('lists again when a panel starts or ends its session, or closes', async () => {
    const made = makeSettings([
      { status: 200, body: [] },
      { status: 200, body: [sessionModel('s1')] },
      { status: 200, body: [sessionModel('s1')] },
      { status: 200, body: [sessionModel('s1')] }
    ]);
    const { widgetAdded, running, instances } = followingPanels(made.settings);
    await running.refresh();
    const content = {
      sessionId: 's1',
      shutsDownOnClose: true,
      sessionChanged: new Signal<unknown, unknown>({}),
      sessionEnded: new Signal<unknown, unknown>({})
    };
    const disposed = new Signal<unknown, unknown>({});
    widgetAdded.emit({ content, disposed });
    const listed = () =>
      new Promise<void>(resolve =>
        running.runningChanged.connect(function once() {
          running.runningChanged.disconnect(once);
          resolve();
        })
      );
    let change = listed();
    content.sessionChanged.emit(sessionModel('s1'));
    await change;
    expect(running.sessions.map(s => s.id)).toEqual(['s1']);
    // Closed with "Shut down on close": gone from the list at once, and not
    // listed again while its DELETE is on its way.
    change = listed();
    disposed.emit(undefined);
    await change;
    expect(running.sessions).toEqual([]);
    await running.refresh();
    expect(running.sessions).toEqual([]);
    running.dispose();
    instances.dispose();
  });

  it("keeps listing an agent's terminal whose view was closed", async () => {
    const agentSession = {
      ...sessionModel('s1'),
      agent: { id: 'a1', name: 'claude' }
    };
    const made = makeSettings([
      { status: 200, body: [agentSession] },
      { status: 200, body: [agentSession] }
    ]);
    const { widgetAdded, running, instances } = followingPanels(made.settings);
    await running.refresh();
    const content = {
      sessionId: 's1',
      session: agentSession,
      sessionChanged: new Signal<unknown, unknown>({}),
      sessionEnded: new Signal<unknown, unknown>({})
    };
    const disposed = new Signal<unknown, unknown>({});
    widgetAdded.emit({ content, disposed });
    disposed.emit(undefined);
    await running.refresh();
    expect(running.sessions.map(s => s.id)).toEqual(['s1']);
    running.dispose();
    instances.dispose();
  });

  it('shuts down every session the server lists now, not the list last shown', async () => {
    const t = makeRunning([
      { status: 200, body: [sessionModel('s1')] },
      // Opened since: the server lists three.
      {
        status: 200,
        body: [sessionModel('s1'), sessionModel('s2'), sessionModel('s3')]
      },
      { status: 204 },
      { status: 204 },
      { status: 204 },
      { status: 200, body: [] }
    ]);
    await t.running.refresh();
    await t.running.shutdownAll();
    const deleted = t.requests
      .filter(r => r.method === 'DELETE')
      .map(pathOf)
      .sort();
    expect(deleted).toEqual([
      '/user/alice/tool-terminal/api/sessions/s1',
      '/user/alice/tool-terminal/api/sessions/s2',
      '/user/alice/tool-terminal/api/sessions/s3'
    ]);
    t.running.dispose();
    t.instances.dispose();
  });
});
