// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import type { Terminal } from '@jupyterlab/services';

import {
  neutralizeBracketedPaste,
  ToolTerminalConnection,
  webSocketUrl
} from '../connection';
import {
  FakeWebSocket,
  makeSessions,
  makeSettings,
  pathOf,
  sessionModel
} from './helpers';

/**
 * Collect the messages, statuses, exits and errors of a connection.
 */
function record(connection: ToolTerminalConnection) {
  const messages: Terminal.IMessage[] = [];
  const statuses: string[] = [];
  const exits: (number | null)[] = [];
  const errors: string[] = [];
  let lost = 0;
  let ended = 0;
  connection.messageReceived.connect((_, msg) => messages.push(msg));
  connection.ended.connect(() => ended++);
  connection.connectionStatusChanged.connect((_, s) => statuses.push(s));
  connection.exited.connect((_, code) => exits.push(code));
  connection.errorReceived.connect((_, e) => errors.push(e));
  connection.connectionLost.connect(() => lost++);
  return {
    messages,
    statuses,
    exits,
    errors,
    get lost() {
      return lost;
    },
    get ended() {
      return ended;
    }
  };
}

/**
 * A connection to session `s1` with test server settings (from `makeSettings`,
 * returned alongside it); `options` are added to the connection's options.
 */
function openConnection(
  options: Partial<ToolTerminalConnection.IOptions> = {}
) {
  const made = makeSettings();
  const connection = new ToolTerminalConnection({
    session: sessionModel('s1'),
    sessions: makeSessions(made.settings),
    ...options
  });
  return { ...made, connection };
}

describe('webSocketUrl', () => {
  it('joins wsUrl (with a JupyterHub prefix) and the session id', () => {
    const { settings } = makeSettings();
    expect(webSocketUrl('abc', settings)).toBe(
      'ws://localhost:8888/user/alice/tool-terminal/websocket/abc'
    );
  });

  it('encodes the session id', () => {
    const { settings } = makeSettings();
    expect(webSocketUrl('a/b?c', settings)).toBe(
      'ws://localhost:8888/user/alice/tool-terminal/websocket/a%2Fb%3Fc'
    );
  });

  it('does not append the token unless the settings say so', () => {
    const { settings } = makeSettings([], {
      token: 'secret',
      appendToken: false
    });
    expect(webSocketUrl('abc', settings)).not.toContain('token');
  });

  it('appends the token, encoded, when the settings say so', () => {
    const { settings } = makeSettings([], {
      token: 'se cret&x',
      appendToken: true
    });
    expect(webSocketUrl('abc', settings)).toBe(
      'ws://localhost:8888/user/alice/tool-terminal/websocket/abc?token=se%20cret%26x'
    );
  });

  it('appends no empty token', () => {
    const { settings } = makeSettings([], { token: '', appendToken: true });
    expect(webSocketUrl('abc', settings)).not.toContain('?');
  });

  it('follows a cross-origin wsUrl', () => {
    const { settings } = makeSettings([], {
      wsUrl: 'wss://hub.example.org/user/bob/',
      token: 't',
      appendToken: true
    });
    expect(webSocketUrl('s', settings)).toBe(
      'wss://hub.example.org/user/bob/tool-terminal/websocket/s?token=t'
    );
  });
});

describe('ToolTerminalConnection', () => {
  beforeEach(() => {
    FakeWebSocket.instances = [];
  });

  it('implements the terminal connection surface', () => {
    const { settings, connection } = openConnection();
    expect(connection.name).toBe('s1');
    expect(connection.model).toEqual({ name: 's1' });
    expect(connection.instance).toBe('pg-1');
    expect(connection.serverSettings).toBe(settings);
    expect(connection.connectionStatus).toBe('connecting');
    expect(FakeWebSocket.last.url).toBe(
      'ws://localhost:8888/user/alice/tool-terminal/websocket/s1'
    );
    connection.dispose();
  });

  it('keeps the reason the server gave before it closed', () => {
    const { connection } = openConnection();
    const ws = FakeWebSocket.last;
    ws.open();
    ws.receive(['error', 'Input not sent']);
    ws.receive(['stdout', 'more output']);
    expect(connection.lastError).toBeNull();
    ws.receive(['error', 'Your login is no longer valid here']);
    ws.drop(1008);
    expect(connection.lastError).toBe('Your login is no longer valid here');
    connection.dispose();
  });

  it('is connected when the socket opens', () => {
    const { connection } = openConnection();
    const log = record(connection);
    FakeWebSocket.last.open();
    expect(connection.connectionStatus).toBe('connected');
    expect(log.statuses).toEqual(['connected']);
    connection.dispose();
  });

  it('forwards stdout and ignores setup, unknown and malformed frames', () => {
    const { connection } = openConnection();
    const log = record(connection);
    const ws = FakeWebSocket.last;
    ws.open();
    ws.receive(['setup', {}]);
    ws.receive(['stdout', 'hello\r\n']);
    ws.receive(['whatever', 1]);
    ws.receive('not json');
    ws.receive({ type: 'stdout' });
    ws.receive([42]);
    ws.receive(['stdout', 7]);
    ws.receive(['stdout', '42\r\n']);
    expect(log.messages).toEqual([
      { type: 'stdout', content: ['hello\r\n'] },
      { type: 'stdout', content: ['42\r\n'] }
    ]);
    expect(log.errors).toEqual([]);
    connection.dispose();
  });

  it('sends stdin and set_size as terminado frames', () => {
    const { connection } = openConnection();
    const ws = FakeWebSocket.last;
    ws.open();
    connection.send({ type: 'stdin', content: ['echo $((6*7))\r'] });
    connection.send({ type: 'set_size', content: [24, 80, 400, 640] });
    connection.send({ type: 'stdout', content: ['not from a client'] });
    connection.send({ type: 'disconnect', content: [1] });
    expect(ws.sent).toEqual([
      ['stdin', 'echo $((6*7))\r'],
      ['set_size', 24, 80, 400, 640]
    ]);
    connection.dispose();
  });

  it('neutralises the escapes inside a bracketed paste it sends', () => {
    const { connection } = openConnection();
    const ws = FakeWebSocket.last;
    // Queued before the socket opens, then sent: the same rule applies.
    connection.send({
      type: 'stdin',
      content: ['\x1b[200~foo\x1b[201~\rrm -rf ~\r\x1b[201~']
    });
    ws.open();
    connection.send({
      type: 'stdin',
      content: ['\x1b[200~a\x1b]52;c;?\x07\x1b[201~']
    });
    // Keystrokes keep their escapes (arrow keys, Alt+key, Escape).
    connection.send({ type: 'stdin', content: ['\x1b[A'] });
    connection.send({ type: 'stdin', content: ['\x1b'] });
    expect(ws.sent).toEqual([
      ['stdin', '\x1b[200~foo\u241b[201~\rrm -rf ~\r\x1b[201~'],
      ['stdin', '\x1b[200~a\u241b]52;c;?\x07\x1b[201~'],
      ['stdin', '\x1b[A'],
      ['stdin', '\x1b']
    ]);
    connection.dispose();
  });

  it('queues keystrokes until the socket opens', () => {
    const { connection } = openConnection();
    const ws = FakeWebSocket.last;
    connection.send({ type: 'stdin', content: ['a'] });
    connection.send({ type: 'set_size', content: [30, 100] });
    connection.send({ type: 'stdin', content: ['b'] });
    expect(ws.sent).toEqual([]);
    ws.open();
    expect(ws.sent).toEqual([
      ['set_size', 30, 100],
      ['stdin', 'a'],
      ['stdin', 'b']
    ]);
    connection.dispose();
  });

  it('reports the exit code, then the disconnect, without reconnecting', () => {
    const { connection } = openConnection({ reconnectDelay: 0 });
    const log = record(connection);
    const ws = FakeWebSocket.last;
    ws.open();
    ws.receive(['exit', 3]);
    ws.receive(['disconnect', 1]);
    ws.drop();
    expect(log.exits).toEqual([3]);
    expect(connection.exitCode).toBe(3);
    expect(connection.hasEnded).toBe(true);
    // The end is said once, by the panel: the terminal widget (which writes
    // "[Finished… Term Session]" for a disconnect message) never gets one.
    expect(log.messages).toEqual([]);
    expect(log.ended).toBe(1);
    expect(connection.connectionStatus).toBe('disconnected');
    expect(FakeWebSocket.instances).toHaveLength(1);
    expect(log.lost).toBe(0);
    // Keystrokes after the end go nowhere.
    connection.send({ type: 'stdin', content: ['x'] });
    expect(ws.sent).toEqual([]);
    connection.dispose();
  });

  it('emits server error messages', () => {
    const { connection } = openConnection();
    const log = record(connection);
    FakeWebSocket.last.open();
    FakeWebSocket.last.receive(['error', 'The tool instance stopped']);
    expect(log.errors).toEqual(['The tool instance stopped']);
    connection.dispose();
  });

  it('reconnects a dropped socket and sends the last size again', async () => {
    jest.useFakeTimers();
    try {
      const { connection } = openConnection({ reconnectDelay: 100 });
      const log = record(connection);
      FakeWebSocket.last.open();
      connection.send({ type: 'set_size', content: [40, 120] });
      FakeWebSocket.last.drop();
      expect(connection.connectionStatus).toBe('connecting');
      jest.advanceTimersByTime(100);
      expect(FakeWebSocket.instances).toHaveLength(2);
      FakeWebSocket.last.open();
      expect(connection.connectionStatus).toBe('connected');
      expect(FakeWebSocket.last.sent).toEqual([['set_size', 40, 120]]);
      expect(FakeWebSocket.last.url).toBe(FakeWebSocket.instances[0].url);
      expect(log.lost).toBe(0);
      connection.dispose();
    } finally {
      jest.useRealTimers();
    }
  });

  it('gives up when the session is gone (upgrade refused)', () => {
    jest.useFakeTimers();
    try {
      const { connection } = openConnection({ reconnectDelay: 10 });
      const log = record(connection);
      FakeWebSocket.last.open();
      FakeWebSocket.last.drop();
      jest.advanceTimersByTime(10);
      FakeWebSocket.last.fail();
      jest.runOnlyPendingTimers();
      expect(FakeWebSocket.instances).toHaveLength(2);
      expect(connection.connectionStatus).toBe('disconnected');
      expect(connection.hasEnded).toBe(true);
      expect(log.lost).toBe(1);
      connection.dispose();
    } finally {
      jest.useRealTimers();
    }
  });

  it('does not retry a socket closed because access is gone (1008)', () => {
    jest.useFakeTimers();
    try {
      const { connection } = openConnection({ reconnectDelay: 10 });
      const log = record(connection);
      FakeWebSocket.last.open();
      FakeWebSocket.last.receive(['error', 'No longer shared']);
      FakeWebSocket.last.drop(1008);
      jest.runOnlyPendingTimers();
      expect(FakeWebSocket.instances).toHaveLength(1);
      expect(connection.connectionStatus).toBe('disconnected');
      expect(connection.hasEnded).toBe(true);
      expect(log.errors).toEqual(['No longer shared']);
      expect(log.lost).toBe(1);
      connection.dispose();
    } finally {
      jest.useRealTimers();
    }
  });

  it('stops after the maximum number of reconnections', () => {
    jest.useFakeTimers();
    try {
      const { connection } = openConnection({
        reconnectDelay: 10,
        maxReconnects: 2
      });
      const log = record(connection);
      FakeWebSocket.last.open();
      for (let i = 0; i < 3; i++) {
        // Sockets that close before they open, without an error.
        FakeWebSocket.last.drop();
        jest.runOnlyPendingTimers();
      }
      expect(FakeWebSocket.instances).toHaveLength(3);
      expect(log.lost).toBe(1);
      expect(connection.connectionStatus).toBe('disconnected');
      connection.dispose();
    } finally {
      jest.useRealTimers();
    }
  });

  it('starts a new session in the same instance and connects to it', async () => {
    const { settings, requests } = makeSettings([
      { status: 201, body: sessionModel('s2') }
    ]);
    const connection = new ToolTerminalConnection({
      session: sessionModel('s1'),
      sessions: makeSessions(settings)
    });
    const changed: string[] = [];
    connection.sessionChanged.connect((_, s) => changed.push(s.id));
    const first = FakeWebSocket.last;
    first.open();
    connection.send({ type: 'set_size', content: [25, 90] });
    first.receive(['exit', 0]);
    first.receive(['disconnect', 1]);
    first.drop();

    const started = connection.startNewSession();
    // Let the POST resolve, then accept the new socket.
    await new Promise(resolve => setTimeout(resolve, 0));
    expect(FakeWebSocket.instances).toHaveLength(2);
    const second = FakeWebSocket.last;
    expect(second.url).toBe(
      'ws://localhost:8888/user/alice/tool-terminal/websocket/s2'
    );
    second.open();
    await expect(started).resolves.toEqual(sessionModel('s2'));
    expect(requests[0].method).toBe('POST');
    expect(JSON.parse(requests[0].body)).toEqual({ instance: 'pg-1' });
    expect(connection.name).toBe('s2');
    expect(connection.hasEnded).toBe(false);
    expect(connection.exitCode).toBeNull();
    expect(changed).toEqual(['s2']);
    expect(second.sent).toEqual([['set_size', 25, 90]]);
    connection.dispose();
  });

  it('resets through the REST route, keeping its socket', async () => {
    const { settings, requests } = makeSettings([
      { status: 200, body: sessionModel('s1') }
    ]);
    const connection = new ToolTerminalConnection({
      session: sessionModel('s1'),
      sessions: makeSessions(settings)
    });
    FakeWebSocket.last.open();
    await connection.reset();
    expect(requests[0].method).toBe('POST');
    expect(pathOf(requests[0])).toBe(
      '/user/alice/tool-terminal/api/sessions/s1/reset'
    );
    expect(FakeWebSocket.instances).toHaveLength(1);
    expect(FakeWebSocket.last.closed).toBe(false);
    connection.dispose();
  });

  it('shuts down: deletes the session and closes the socket', async () => {
    const { settings, requests } = makeSettings([{ status: 204 }]);
    const connection = new ToolTerminalConnection({
      session: sessionModel('s1'),
      sessions: makeSessions(settings)
    });
    let disposed = false;
    connection.disposed.connect(() => (disposed = true));
    const ws = FakeWebSocket.last;
    ws.open();
    await connection.shutdown();
    expect(requests[0].method).toBe('DELETE');
    expect(pathOf(requests[0])).toBe(
      '/user/alice/tool-terminal/api/sessions/s1'
    );
    expect(ws.closed).toBe(true);
    expect(disposed).toBe(true);
    expect(connection.isDisposed).toBe(true);
    expect(connection.connectionStatus).toBe('disconnected');
    connection.dispose();
  });

  it('treats a session already gone as shut down', async () => {
    const { settings } = makeSettings([
      { status: 403, body: { message: 'Forbidden' } }
    ]);
    const connection = new ToolTerminalConnection({
      session: sessionModel('s1'),
      sessions: makeSessions(settings)
    });
    FakeWebSocket.last.open();
    await expect(connection.shutdown()).resolves.toBeUndefined();
    connection.dispose();
  });

  it('does not delete a session that already ended', async () => {
    const { requests, connection } = openConnection();
    FakeWebSocket.last.open();
    FakeWebSocket.last.receive(['exit', 0]);
    await connection.shutdown();
    expect(requests).toHaveLength(0);
    connection.dispose();
  });

  it('closes its socket and ignores it after dispose', () => {
    const { connection } = openConnection();
    const ws = FakeWebSocket.last;
    ws.open();
    connection.dispose();
    expect(ws.closed).toBe(true);
    connection.send({ type: 'stdin', content: ['x'] });
    expect(ws.sent).toEqual([]);
    connection.dispose();
    expect(connection.isDisposed).toBe(true);
  });
});

describe('neutralizeBracketedPaste', () => {
  const start = '\x1b[200~';
  const end = '\x1b[201~';

  it('replaces every ESC between the markers with U+241B', () => {
    const out = neutralizeBracketedPaste(
      `${start}foo\x1b[201~\rrm -rf ~\r\x1b\x1b${end}`
    );
    expect(out).toBe(`${start}foo\u241b[201~\rrm -rf ~\r\u241b\u241b${end}`);
    // Exactly one pair of markers is left, at the ends.
    expect(out.split('\x1b')).toHaveLength(3);
    expect(out.startsWith(start)).toBe(true);
    expect(out.endsWith(end)).toBe(true);
  });

  it('keeps a paste without escapes, and an empty paste, as they are', () => {
    expect(neutralizeBracketedPaste(`${start}ls -l\r${end}`)).toBe(
      `${start}ls -l\r${end}`
    );
    expect(neutralizeBracketedPaste(`${start}${end}`)).toBe(`${start}${end}`);
  });

  it('leaves input that is not one bracketed paste unchanged', () => {
    for (const data of [
      '',
      'echo hi\r',
      '\x1b',
      '\x1b[A',
      '\x1bOP',
      // Markers that do not enclose the whole chunk.
      `${start}foo`,
      `foo${end}`,
      `x${start}a\x1bb${end}`,
      `${start}a\x1bb${end}x`,
      `${start}\x1b[201`
    ]) {
      expect(neutralizeBracketedPaste(data)).toBe(data);
    }
  });
});
