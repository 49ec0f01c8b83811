// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import type { JupyterFrontEnd } from '@jupyterlab/application';
import type { MainAreaWidget } from '@jupyterlab/apputils';
import { Notification } from '@jupyterlab/apputils';
import { acceptDialog, waitForDialog } from '@jupyterlab/testutils';
import type { ServerConnection } from '@jupyterlab/services';
import { nullTranslator } from '@jupyterlab/translation';
import { CommandRegistry } from '@lumino/commands';
import { Title } from '@lumino/widgets';

import type { IAgentModel } from '../agents/api';
import {
  createAgent,
  grantControl,
  listAgents,
  shareWithAgent,
  stopSharingWithAgent
} from '../agents/api';
import {
  ApprovalNotifier,
  DEFAULT_CONTROL_MINUTES,
  requestedMinutes
} from '../agents/approval';
import {
  claudeCommand,
  clientConfigJson,
  mcpUrl,
  shellWord
} from '../agents/config';
import { AgentsModel } from '../agents/model';
import { AgentCommandIDs, agentsPlugin } from '../agents/plugin';
import { agentLabels } from '../agents/share';
import { setTitle } from '../commands';
import { ControlStatus, formatRemaining } from '../agents/statusbar';
import type { IToolTerminal, IToolTerminalTracker } from '../tokens';
import type { IFakeAnswer, IRecordedRequest } from './helpers';
import {
  instanceModel,
  makeSettings,
  pathOf,
  sessionModel,
  until
} from './helpers';

const trans = nullTranslator.load('jupyter-tool-terminal');

/**
 * An agent as `GET /tool-terminal/api/agents` lists it.
 */
function agentModel(
  id: string,
  overrides: Partial<IAgentModel> = {}
): IAgentModel {
  return {
    id,
    name: `agent-${id}`,
    created: '2026-01-01T00:00:00Z',
    expires: '2026-01-08T00:00:00Z',
    control_until: null,
    request: null,
    shared: [],
    ...overrides
  };
}

/**
 * A model that does not poll by itself, answering `answers` in turn.
 */
function makeModel(answers: IFakeAnswer[]) {
  const made = makeSettings(answers);
  const model = new AgentsModel({ serverSettings: made.settings, auto: false });
  return { ...made, model };
}

/**
 * The notifications of the page's manager.
 */
function notifications(): Notification.INotification[] {
  return Notification.manager.notifications;
}

afterEach(() => {
  Notification.dismiss();
  jest.useRealTimers();
});

describe('agents: client configuration', () => {
  it('gives the absolute MCP URL below the base URL', () => {
    const { settings } = makeSettings();
    expect(mcpUrl(settings)).toBe(
      'http://localhost:8888/user/alice/tool-terminal/mcp'
    );
  });

  it('resolves a relative base URL against the page', () => {
    const settings = {
      baseUrl: '/services/tool-terminal/'
    } as ServerConnection.ISettings;
    expect(mcpUrl(settings, 'https://hub.example.org/user/alice/lab')).toBe(
      'https://hub.example.org/services/tool-terminal/tool-terminal/mcp'
    );
  });

  it('writes the mcpServers JSON with type, url and the bearer header', () => {
    const url = 'http://localhost:8888/user/alice/tool-terminal/mcp';
    const text = clientConfigJson('claude', url, 'tok-123');
    expect(JSON.parse(text)).toEqual({
      mcpServers: {
        claude: {
          type: 'http',
          url,
          headers: { Authorization: 'Bearer tok-123' }
        }
      }
    });
  });

  it('writes the claude mcp add line', () => {
    expect(
      claudeCommand('claude', 'http://h/tool-terminal/mcp', 'tok-123')
    ).toBe(
      'claude mcp add --transport http claude http://h/tool-terminal/mcp --header "Authorization: Bearer tok-123"'
    );
  });

  it('quotes a name the shell would split or expand', () => {
    expect(shellWord('my agent')).toBe("'my agent'");
    expect(shellWord("it's $HOME")).toBe("'it'\\''s $HOME'");
    expect(shellWord('plain-name_1.0')).toBe('plain-name_1.0');
  });
});

describe('agents: REST routes', () => {
  it('lists, creates, grants and shares at the contract paths', async () => {
    const { settings, requests } = makeSettings([
      { status: 200, body: [agentModel('a1'), { id: 'broken' }] },
      { status: 201, body: { ...agentModel('a2'), token: 'tok' } },
      { status: 200, body: { control_until: '2026-01-01T00:10:00Z' } },
      { status: 201, body: {} },
      { status: 204 }
    ]);
    const agents = await listAgents(settings);
    expect(agents.map(a => a.id)).toEqual(['a1']);
    const created = await createAgent('a two', settings);
    expect(created.token).toBe('tok');
    expect(await grantControl('a2', 15, settings)).toBe('2026-01-01T00:10:00Z');
    await shareWithAgent('a2', 's 1', settings);
    await stopSharingWithAgent('a2', 's 1', settings);
    const base = '/user/alice/tool-terminal/api/';
    expect(requests.map(r => [r.method, pathOf(r), r.body])).toEqual([
      ['GET', `${base}agents`, ''],
      ['POST', `${base}agents`, JSON.stringify({ name: 'a two' })],
      ['POST', `${base}agents/a2/control`, JSON.stringify({ minutes: 15 })],
      ['POST', `${base}agents/a2/shared`, JSON.stringify({ session: 's 1' })],
      ['DELETE', `${base}agents/a2/shared/s%201`, '']
    ]);
  });

  it('refuses a created agent without a token', async () => {
    const { settings } = makeSettings([{ status: 201, body: agentModel('a') }]);
    await expect(createAgent('a', settings)).rejects.toThrow('new agent');
  });
});

describe('agents: the poller', () => {
  it('signals a change once, not for the same list again', async () => {
    const list = [agentModel('a1')];
    const { model } = makeModel([
      { status: 200, body: list },
      { status: 200, body: list },
      { status: 200, body: [] }
    ]);
    let changes = 0;
    model.changed.connect(() => (changes += 1));
    await model.refresh();
    await model.refresh();
    expect(changes).toBe(1);
    expect(model.get('a1')?.name).toBe('agent-a1');
    await model.refresh();
    expect(changes).toBe(2);
    expect(model.agents).toEqual([]);
    model.dispose();
  });

  it('rejects a failed listing and keeps the last list (the poll backs off)', async () => {
    const { model } = makeModel([
      { status: 200, body: [agentModel('a1')] },
      { status: 500, body: { message: 'boom' } }
    ]);
    await model.refresh();
    await expect(model.refresh()).rejects.toThrow('boom');
    expect(model.agents.map(a => a.id)).toEqual(['a1']);
    expect(model.unavailable).toBe(false);
    model.dispose();
  });

  it('stops on a server without agent routes', async () => {
    const { model } = makeModel([{ status: 404, body: { message: 'no' } }]);
    let changes = 0;
    model.changed.connect(() => (changes += 1));
    await expect(model.refresh()).rejects.toThrow();
    expect(model.unavailable).toBe(true);
    expect(changes).toBe(1);
    model.dispose();
  });

  it('polls by itself, every interval', async () => {
    const { settings, requests } = makeSettings([
      { status: 200, body: [] },
      { status: 200, body: [] }
    ]);
    const model = new AgentsModel({ serverSettings: settings, interval: 10 });
    await until(() => requests.length >= 2, 2000);
    expect(requests.every(r => pathOf(r).endsWith('/api/agents'))).toBe(true);
    model.dispose();
  });

  it('lists the agents in control, the one ending first first', async () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    const { model } = makeModel([
      {
        status: 200,
        body: [
          agentModel('late', { control_until: '2026-01-01T00:09:00Z' }),
          agentModel('none'),
          agentModel('over', { control_until: '2025-12-31T23:59:00Z' }),
          agentModel('soon', { control_until: '2026-01-01T00:01:00Z' })
        ]
      }
    ]);
    await model.refresh();
    expect(model.controlling(now).map(a => a.id)).toEqual(['soon', 'late']);
    model.dispose();
  });
});

describe('agents: approval notifications', () => {
  const request = {
    reason: 'run the test suite',
    minutes: 5,
    created: '2026-01-01T00:00:00Z'
  };

  it('shows one notification per request, naming the agent and its reason', async () => {
    const pending = [agentModel('a1', { name: 'claude', request })];
    const { model } = makeModel([
      { status: 200, body: pending },
      { status: 200, body: [agentModel('a1', { name: 'claude' }), ...[]] },
      { status: 200, body: pending },
      {
        status: 200,
        body: [
          agentModel('a1', {
            name: 'claude',
            request: { ...request, created: '2026-01-01T00:05:00Z' }
          })
        ]
      }
    ]);
    const notifier = new ApprovalNotifier({ model, trans });
    await model.refresh();
    expect(notifications()).toHaveLength(1);
    const [shown] = notifications();
    expect(shown.message).toContain('claude');
    expect(shown.message).toContain('run the test suite');
    expect(shown.options.autoClose).toBe(false);
    expect(shown.options.actions?.map(a => a.label)).toEqual([
      'Allow for 5 minutes',
      'Deny'
    ]);
    // Answered elsewhere: the notification goes.
    await model.refresh();
    expect(notifications()).toHaveLength(0);
    // The same request listed again (a stale list) is the same request.
    await model.refresh();
    expect(notifications()).toHaveLength(1);
    // A new request of the same agent: a new notification.
    await model.refresh();
    expect(notifications()).toHaveLength(1);
    expect(notifications()[0].id).not.toBe(shown.id);
    notifier.dispose();
    expect(notifications()).toHaveLength(0);
    model.dispose();
  });

  it('does not show the same request twice while the list catches up', async () => {
    const pending = [agentModel('a1', { request })];
    const { model, requests } = makeModel([
      { status: 200, body: pending },
      // Listed before the grant reached the server, with another change.
      { status: 200, body: [...pending, agentModel('a2')] },
      { status: 200, body: { control_until: '2026-01-01T00:05:00Z' } },
      { status: 200, body: [agentModel('a1')] }
    ]);
    const notifier = new ApprovalNotifier({ model, trans });
    await model.refresh();
    const allow = notifications()[0].options.actions![0];
    Notification.dismiss(notifications()[0].id);
    const polled = model.refresh();
    allow.callback(new MouseEvent('click'));
    await polled;
    expect(notifications()).toHaveLength(0);
    await until(() => requests.length === 4);
    expect(notifications()).toHaveLength(0);
    notifier.dispose();
    model.dispose();
  });

  it.each([
    [0, 'POST', JSON.stringify({ minutes: 5 })],
    [1, 'DELETE', '']
  ])('answers with action %i: %s .../control', async (action, method, body) => {
    const { model, requests } = makeModel([
      { status: 200, body: [agentModel('a1', { request })] },
      { status: method === 'POST' ? 200 : 204, body: {} },
      { status: 200, body: [agentModel('a1')] }
    ]);
    const notifier = new ApprovalNotifier({ model, trans });
    await model.refresh();
    notifications()[0].options.actions![action].callback(
      new MouseEvent('click')
    );
    await until(() => requests.length === 3);
    expect([requests[1].method, pathOf(requests[1]), requests[1].body]).toEqual(
      [method, '/user/alice/tool-terminal/api/agents/a1/control', body]
    );
    expect(pathOf(requests[2])).toBe('/user/alice/tool-terminal/api/agents');
    notifier.dispose();
    model.dispose();
  });

  it('allows the requested minutes, or the default', () => {
    expect(requestedMinutes({ ...request, minutes: 30 })).toBe(30);
    expect(requestedMinutes({ ...request, minutes: null })).toBe(
      DEFAULT_CONTROL_MINUTES
    );
    expect(requestedMinutes({ reason: '', created: 'x' })).toBe(10);
    expect(requestedMinutes({ ...request, minutes: -3 })).toBe(10);
  });
});

describe('agents: control status item', () => {
  it('formats the time left as a clock', () => {
    expect(formatRemaining(0)).toBe('0:00');
    expect(formatRemaining(-5000)).toBe('0:00');
    expect(formatRemaining(1)).toBe('0:01');
    expect(formatRemaining(599_000)).toBe('9:59');
    expect(formatRemaining(3_725_000)).toBe('1:02:05');
  });

  it('shows the agent and the time left, ticking, and hides when control ends', async () => {
    jest.useFakeTimers();
    let now = Date.parse('2026-01-01T00:00:00Z');
    const { model } = makeModel([
      {
        status: 200,
        body: [
          agentModel('a1', {
            name: 'claude',
            control_until: '2026-01-01T00:00:03Z'
          })
        ]
      }
    ]);
    const status = new ControlStatus({ model, trans, now: () => now });
    let toggles = 0;
    status.activeStateChanged.connect(() => (toggles += 1));
    expect(status.isActive).toBe(false);
    await model.refresh();
    expect(status.isActive).toBe(true);
    expect(status.node.textContent).toBe('Agent claude: 0:03 left');
    now += 1000;
    jest.advanceTimersByTime(1000);
    expect(status.node.textContent).toBe('Agent claude: 0:02 left');
    now += 2000;
    jest.advanceTimersByTime(2000);
    expect(status.isActive).toBe(false);
    expect(toggles).toBe(2);
    expect(jest.getTimerCount()).toBe(0);
    status.dispose();
    model.dispose();
  });

  it('revokes control from its dialog', async () => {
    const now = Date.now();
    const until10 = new Date(now + 600_000).toISOString();
    const { model, requests } = makeModel([
      {
        status: 200,
        body: [agentModel('a1', { name: 'claude', control_until: until10 })]
      },
      { status: 204 },
      { status: 200, body: [agentModel('a1', { name: 'claude' })] }
    ]);
    const status = new ControlStatus({ model, trans });
    await model.refresh();
    expect(status.isActive).toBe(true);
    const shown = status.showRevokeDialog();
    await waitForDialog();
    const button = Array.from(
      document.querySelectorAll<HTMLButtonElement>('.jp-Dialog button')
    ).find(b => b.textContent === 'Revoke control');
    expect(button).toBeDefined();
    button!.click();
    await shown;
    expect([requests[1].method, pathOf(requests[1])]).toEqual([
      'DELETE',
      '/user/alice/tool-terminal/api/agents/a1/control'
    ]);
    expect(status.isActive).toBe(false);
    status.dispose();
    model.dispose();
  });
});

describe('agents: plugin', () => {
  /**
   * Server settings whose fake fetch answers by method and path below
   * `tool-terminal/api/` (the plugin's own poller asks too, at times of its
   * own), recording every request.
   */
  function routedSettings(routes: Record<string, IFakeAnswer>) {
    const requests: IRecordedRequest[] = [];
    const fakeFetch = async (request: Request): Promise<Response> => {
      const body = request.body === null ? '' : await request.text();
      requests.push({
        url: request.url,
        method: request.method,
        headers: request.headers,
        body
      });
      const path = pathOf({ url: request.url } as IRecordedRequest).replace(
        '/user/alice/tool-terminal/api/',
        ''
      );
      const answer = routes[`${request.method} ${path}`] ?? {
        status: 200,
        body: []
      };
      return new Response(
        answer.status === 204 ? null : JSON.stringify(answer.body ?? {}),
        { status: answer.status }
      );
    };
    const { settings } = makeSettings([], {
      fetch: fakeFetch as typeof fetch
    });
    return { settings, requests };
  }

  /**
   * The agents plugin activated on an application whose current tool
   * terminal shows session `s1`.
   */
  function activate(routes: Record<string, IFakeAnswer>) {
    const made = routedSettings(routes);
    const commands = new CommandRegistry();
    const launched: unknown[] = [];
    const app = {
      commands,
      contextMenu: { addItem: () => undefined },
      serviceManager: { serverSettings: made.settings }
    } as unknown as JupyterFrontEnd;
    const tracker = {
      currentWidget: { content: { isLive: true, sessionId: 's1' } }
    } as unknown as IToolTerminalTracker;
    const launcher = {
      add: (item: unknown) => {
        launched.push(item);
        return {
          dispose: () => launched.splice(launched.indexOf(item), 1)
        };
      }
    };
    agentsPlugin.activate(app, tracker, null, launcher as never, null, null);
    return { ...made, commands, launched };
  }

  it('puts Connect an Agent in the launcher', () => {
    const { launched, commands } = activate({});
    expect(launched).toEqual([
      expect.objectContaining({ command: AgentCommandIDs.connect })
    ]);
    expect(commands.label(AgentCommandIDs.connect)).toBe('Connect an Agent…');
  });

  it('hides Connect an Agent where the server has agents turned off', async () => {
    const { launched, commands } = activate({
      'GET agents': { status: 404, body: { message: 'turned off' } }
    });
    await until(() => launched.length === 0, 2000);
    expect(commands.isVisible(AgentCommandIDs.connect)).toBe(false);
    expect(commands.isVisible(AgentCommandIDs.share)).toBe(false);
  });

  it('creates an agent and shows the URL, the token and the configuration', async () => {
    const { commands, requests } = activate({
      'POST agents': {
        status: 201,
        body: { ...agentModel('a9', { name: 'cc' }), token: 'T0K' }
      }
    });
    const done = commands.execute(AgentCommandIDs.connect);
    await waitForDialog();
    const input = document.querySelector<HTMLInputElement>('.jp-Dialog input');
    input!.value = 'cc';
    await acceptDialog();
    await until(
      () => document.querySelector('.jp-ToolTerminal-agentConnect') !== null,
      2000
    );
    const texts = Array.from(
      document.querySelectorAll('.jp-ToolTerminal-copyableText')
    ).map(node => node.textContent);
    const url = 'http://localhost:8888/user/alice/tool-terminal/mcp';
    expect(texts).toEqual([
      url,
      'T0K',
      clientConfigJson('cc', url, 'T0K'),
      claudeCommand('cc', url, 'T0K')
    ]);
    await acceptDialog();
    await done;
    expect(
      requests.some(r => r.method === 'POST' && r.body.includes('"cc"'))
    ).toBe(true);
  });

  it('shares the current terminal with the agent picked', async () => {
    const { commands, requests } = activate({
      'GET agents': {
        status: 200,
        body: [agentModel('a1', { name: 'claude' })]
      },
      'POST agents/a1/shared': { status: 201, body: {} }
    });
    const done = commands.execute(AgentCommandIDs.share);
    await waitForDialog();
    await acceptDialog();
    await done;
    const share = requests.find(r => r.method === 'POST');
    expect([pathOf(share!), share!.body]).toEqual([
      '/user/alice/tool-terminal/api/agents/a1/shared',
      JSON.stringify({ session: 's1' })
    ]);
  });

  it('labels agents of the same name by id', () => {
    expect(
      agentLabels([
        agentModel('abcdefghij', { name: 'x' }),
        agentModel('klmnopqrst', { name: 'x' }),
        agentModel('u', { name: 'y' })
      ])
    ).toEqual(['x (abcdefgh)', 'x (klmnopqr)', 'y']);
  });
});

describe("agents: an agent's terminal panel", () => {
  it('names the agent in its title', () => {
    const title = new Title({ owner: {} });
    const widget = {
      title,
      content: {
        instanceId: 'pg-1',
        session: { ...sessionModel('s1'), agent: { id: 'a1', name: 'cc' } }
      }
    } as unknown as MainAreaWidget<IToolTerminal>;
    setTitle(widget, instanceModel(), trans);
    expect(title.label).toBe('PostgreSQL — agent: cc');
    expect(title.caption).toContain('opened by agent cc');
  });
});
