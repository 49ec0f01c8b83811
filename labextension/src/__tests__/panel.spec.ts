// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import type { ITerminal } from '@jupyterlab/terminal';

import { DETACH_CLOSE_CODE } from '../connection';
import { ToolTerminalPanel } from '../panel';
import type { IFakeAnswer } from './helpers';
import {
  FakeWebSocket,
  instanceModel,
  makeSessions,
  makeSettings,
  pathOf,
  quietCanvas,
  sessionModel,
  until
} from './helpers';

/**
 * A panel on instance `pg-1` with test server settings answering `answers`.
 */
function makePanel(
  answers: IFakeAnswer[],
  sessionId?: string,
  terminalOptions: Partial<ITerminal.IOptions> = {}
) {
  const made = makeSettings(answers);
  const panel = new ToolTerminalPanel({
    instance: 'pg-1',
    sessions: makeSessions(made.settings),
    sessionId,
    terminalOptions
  });
  const calls = () =>
    made.requests.map(r => `${r.method} ${pathOf(r).split('/api/')[1]}`);
  const status = () => panel.node.querySelector('.jp-ToolTerminal-status')!;
  const message = () => status().textContent ?? '';
  const button = () =>
    panel.node.querySelector<HTMLButtonElement>('.jp-ToolTerminal-restart')!;
  return { ...made, panel, calls, status, message, button };
}

describe('ToolTerminalPanel', () => {
  beforeAll(quietCanvas);

  beforeEach(() => {
    FakeWebSocket.instances = [];
  });

  it('starts a new session when it has none', async () => {
    const t = makePanel([{ status: 201, body: sessionModel('s1') }]);
    await t.panel.start();
    expect(t.calls()).toEqual(['POST sessions']);
    expect(t.panel.sessionId).toBe('s1');
    expect(FakeWebSocket.last.url).toMatch(/\/websocket\/s1$/);
    t.panel.dispose();
  });

  it('starts the shell at the size the panel will hold', async () => {
    const t = makePanel([{ status: 201, body: sessionModel('s1') }]);
    Object.defineProperty(t.panel.node, 'clientWidth', { value: 800 });
    Object.defineProperty(t.panel.node, 'clientHeight', { value: 312 });
    const context = { font: '', measureText: () => ({ width: 8 }) };
    const canvas = jest
      .spyOn(HTMLCanvasElement.prototype, 'getContext')
      .mockReturnValue(context as never);
    try {
      await t.panel.start();
    } finally {
      canvas.mockReturnValue(null);
    }
    // 800 px of 8 px cells; 312 px of 13 px * 1.2 rows.
    expect(JSON.parse(t.requests[0].body)).toEqual({
      instance: 'pg-1',
      rows: 20,
      cols: 100
    });
    expect(context.font).toContain('13px');
    t.panel.dispose();
  });

  it('leaves the size to the server when it cannot be told', async () => {
    const t = makePanel([{ status: 201, body: sessionModel('s1') }]);
    await t.panel.start();
    expect(JSON.parse(t.requests[0].body)).toEqual({ instance: 'pg-1' });
    t.panel.dispose();
  });

  it('takes an empty session id for none (never GET sessions/)', async () => {
    const t = makePanel([{ status: 201, body: sessionModel('s1') }], '');
    await t.panel.start();
    expect(t.calls()).toEqual(['POST sessions']);
    expect(FakeWebSocket.last.url).toMatch(/\/websocket\/s1$/);
    t.panel.dispose();
  });

  it('reattaches a restored panel to its session, looked up in the list', async () => {
    const t = makePanel(
      [{ status: 200, body: [sessionModel('other'), sessionModel('s1')] }],
      's1'
    );
    await t.panel.start();
    expect(t.calls()).toEqual(['GET sessions']);
    expect(t.panel.sessionId).toBe('s1');
    expect(FakeWebSocket.instances).toHaveLength(1);
    expect(FakeWebSocket.last.url).toMatch(/\/websocket\/s1$/);
    t.panel.dispose();
  });

  it('says a restored session ended and offers a new one, without starting it', async () => {
    const t = makePanel(
      [
        { status: 200, body: [sessionModel('other')] },
        { status: 200, body: [instanceModel()] }
      ],
      's1'
    );
    const changes: unknown[] = [];
    t.panel.sessionChanged.connect((_, session) => changes.push(session));
    await t.panel.start();
    expect(t.calls()).toEqual(['GET sessions', 'GET instances']);
    expect(FakeWebSocket.instances).toHaveLength(0);
    expect(t.message()).toContain('The session of this panel has ended');
    expect(t.button().hidden).toBe(false);
    // Still saved with it: the next reload says the same, and starts no
    // shell by itself.
    expect(t.panel.sessionId).toBe('s1');
    expect(changes).toEqual([]);
    t.panel.dispose();
  });

  it('says when a restored session went with its instance', async () => {
    const gone = makePanel(
      [
        { status: 200, body: [] },
        { status: 200, body: [] }
      ],
      's1'
    );
    await gone.panel.start();
    expect(gone.message()).toContain('The tool instance pg-1 is gone');
    expect(gone.button().hidden).toBe(false);
    gone.panel.dispose();

    const stopped = makePanel(
      [
        { status: 200, body: [] },
        { status: 200, body: [instanceModel('pg-1', 'exited')] }
      ],
      's1'
    );
    await stopped.panel.start();
    expect(stopped.message()).toContain('The tool instance pg-1 is exited');
    stopped.panel.dispose();
  });

  it('names how a restored session ended when the page saw it end', async () => {
    // The instance stopped while the page was open, and runs again by the
    // reload: the saved reason is what the panel says, not a guess.
    const made = makeSettings([
      { status: 200, body: [] },
      { status: 200, body: [instanceModel()] }
    ]);
    const panel = new ToolTerminalPanel({
      instance: 'pg-1',
      sessions: makeSessions(made.settings),
      sessionId: 's1',
      endMessage: 'The tool instance pg-1 stopped; the terminal has ended.'
    });
    await panel.start();
    const text =
      panel.node.querySelector('.jp-ToolTerminal-status')!.textContent ?? '';
    expect(text).toContain('The tool instance pg-1 stopped');
    expect(panel.endMessage).toBe(
      'The tool instance pg-1 stopped; the terminal has ended.'
    );
    panel.dispose();
  });

  it('remembers why its session ended, for the next reload', async () => {
    const t = makePanel([{ status: 201, body: sessionModel('s1') }]);
    const saved: (string | null)[] = [];
    t.panel.endMessageChanged.connect(() => saved.push(t.panel.endMessage));
    await t.panel.start();
    expect(t.panel.endMessage).toBeNull();
    FakeWebSocket.last.receive(['error', 'Access to this session ended.']);
    FakeWebSocket.last.receive(['disconnect', 1]);
    await until(() => saved.length > 0);
    expect(t.panel.endMessage).toBe('Access to this session ended.');
    t.panel.dispose();
  });

  it('"Start a new session" starts one after a restored session ended', async () => {
    const t = makePanel(
      [
        { status: 200, body: [] },
        { status: 200, body: [instanceModel()] },
        { status: 201, body: sessionModel('s2') }
      ],
      's1'
    );
    await t.panel.start();
    t.button().click();
    await until(() => FakeWebSocket.instances.length === 1);
    expect(t.calls()).toEqual([
      'GET sessions',
      'GET instances',
      'POST sessions'
    ]);
    expect(FakeWebSocket.last.url).toMatch(/\/websocket\/s2$/);
    expect(t.panel.sessionId).toBe('s2');
    t.panel.dispose();
  });

  it('"Start a new session" works after a first start failed', async () => {
    const t = makePanel([
      { status: 409, body: { message: 'Tool instance pg-1 is not running.' } },
      { status: 201, body: sessionModel('s2') }
    ]);
    await expect(t.panel.start()).rejects.toThrow('not running');
    expect(t.message()).toContain('not running');
    expect(t.button().hidden).toBe(false);
    t.button().click();
    await until(() => FakeWebSocket.instances.length === 1);
    expect(t.requests[1].body).toBe('{"instance":"pg-1"}');
    expect(FakeWebSocket.last.url).toMatch(/\/websocket\/s2$/);
    t.panel.dispose();
  });

  it('offers a new session when the server says why the session ended', async () => {
    const t = makePanel([{ status: 201, body: sessionModel('s1') }]);
    await t.panel.start();
    const ws = FakeWebSocket.last;
    ws.open();
    ws.receive(['setup', {}]);
    ws.receive(['error', 'The tool instance stopped; the terminal has ended.']);
    ws.receive(['disconnect', 1]);
    expect(t.message()).toContain('The tool instance stopped');
    expect(t.button().hidden).toBe(false);
    t.panel.dispose();
  });

  it('says the instance stopped rather than the exit code it caused', async () => {
    const t = makePanel([
      { status: 201, body: sessionModel('s1') },
      { status: 200, body: [instanceModel('pg-1', 'exited')] }
    ]);
    await t.panel.start();
    const ws = FakeWebSocket.last;
    ws.open();
    ws.receive(['exit', 137]);
    expect(t.message()).toContain('exited with code 137');
    ws.receive(['disconnect', 1]);
    await until(() => t.message().includes('stopped'));
    expect(t.message()).toContain(
      'The tool instance pg-1 stopped; the terminal has ended.'
    );
    expect(t.button().hidden).toBe(false);
    t.panel.dispose();
  });

  it('keeps the exit code of a shell that exited by itself', async () => {
    const t = makePanel([
      { status: 201, body: sessionModel('s1') },
      { status: 200, body: [instanceModel('pg-1', 'running')] }
    ]);
    await t.panel.start();
    const ws = FakeWebSocket.last;
    ws.open();
    ws.receive(['exit', 3]);
    ws.receive(['disconnect', 1]);
    await new Promise(resolve => setTimeout(resolve, 20));
    // A shell that exited by itself: nothing to ask the server.
    expect(t.calls()).toEqual(['POST sessions']);
    expect(t.message()).toContain('exited with code 3');
    t.panel.dispose();
  });

  it('detaches from its session when closed, as JupyterLab terminals do', async () => {
    const t = makePanel([{ status: 201, body: sessionModel('s1') }]);
    await t.panel.start();
    const ws = FakeWebSocket.last;
    ws.open();
    expect(t.panel.shutsDownOnClose).toBe(false);
    t.panel.dispose();
    await new Promise(resolve => setTimeout(resolve, 50));
    expect(t.calls()).toEqual(['POST sessions']);
    expect(ws.closed).toBe(true);
    expect(ws.closeCode).toBe(DETACH_CLOSE_CODE);
  });

  it('kills its session when closed with "Shut down on close"', async () => {
    const t = makePanel(
      [{ status: 201, body: sessionModel('s1') }, { status: 204 }],
      undefined,
      { shutdownOnClose: true }
    );
    await t.panel.start();
    FakeWebSocket.last.open();
    t.panel.dispose();
    await until(() => t.calls().length === 2);
    expect(t.calls()[1]).toBe('DELETE sessions/s1');
  });

  it("leaves an agent's terminal running when closed, ends it on Close", async () => {
    const agentSession = {
      ...sessionModel('s1'),
      agent: { id: 'a1', name: 'claude' }
    };
    const t = makePanel([{ status: 200, body: [agentSession] }], 's1', {
      shutdownOnClose: true
    });
    await t.panel.start();
    const ws = FakeWebSocket.last;
    ws.open();
    t.panel.dispose();
    await new Promise(resolve => setTimeout(resolve, 50));
    expect(t.calls()).toEqual(['GET sessions']);
    expect(ws.closed).toBe(true);

    const closed = makePanel(
      [{ status: 200, body: [agentSession] }, { status: 204 }],
      's1'
    );
    await closed.panel.start();
    FakeWebSocket.last.open();
    await closed.panel.closeSession();
    expect(closed.calls()).toEqual(['GET sessions', 'DELETE sessions/s1']);
    closed.panel.dispose();
  });

  it('closes on an exit with "Close on exit", not on a kill', async () => {
    const t = makePanel(
      [{ status: 201, body: sessionModel('s1') }],
      undefined,
      {
        closeOnExit: true
      }
    );
    await t.panel.start();
    FakeWebSocket.last.open();
    FakeWebSocket.last.receive(['exit', 3]);
    FakeWebSocket.last.receive(['disconnect', 1]);
    expect(t.panel.isDisposed).toBe(true);

    const killed = makePanel(
      [
        { status: 201, body: sessionModel('s2') },
        ...[1, 2, 3, 4].map(() => ({
          status: 200,
          body: [{ ...instanceModel('pg-1'), status: 'running' }]
        }))
      ],
      undefined,
      { closeOnExit: true }
    );
    await killed.panel.start();
    FakeWebSocket.last.open();
    FakeWebSocket.last.receive(['exit', 137]);
    FakeWebSocket.last.receive(['disconnect', 1]);
    expect(killed.panel.isDisposed).toBe(false);
    expect(killed.message()).toContain('137');
    killed.panel.dispose();
  });

  it('keeps the exit code of a killed shell when its instance runs', async () => {
    const t = makePanel([
      { status: 201, body: sessionModel('s1') },
      ...[1, 2, 3, 4].map(() => ({
        status: 200,
        body: [instanceModel('pg-1', 'running')]
      }))
    ]);
    await t.panel.start();
    const ws = FakeWebSocket.last;
    ws.open();
    ws.receive(['exit', 137]);
    ws.receive(['disconnect', 1]);
    // The panel asks the instance state after 0, 0.25, 1 and 3 s of real time.
    await until(() => t.calls().length === 5, 20000);
    expect(t.message()).toContain('exited with code 137');
    t.panel.dispose();
  }, 15000);
});
