// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import {
  FakeWebSocket,
  makeSessions,
  makeSettings,
  pathOf,
  sessionModel
} from './helpers';

describe('ToolTerminalSessions', () => {
  beforeEach(() => {
    FakeWebSocket.instances = [];
  });

  it('lists the sessions and signals a change once', async () => {
    const { settings } = makeSettings([
      { status: 200, body: [sessionModel('s1')] },
      { status: 200, body: [sessionModel('s1')] }
    ]);
    const sessions = makeSessions(settings);
    const changes: string[][] = [];
    sessions.runningChanged.connect((_, list) =>
      changes.push(list.map(s => s.id))
    );
    await sessions.refreshRunning();
    await sessions.refreshRunning();
    expect(sessions.running().map(s => s.id)).toEqual(['s1']);
    expect(changes).toEqual([['s1']]);
    sessions.dispose();
  });

  it('is ready once the list was asked for, answered or not', async () => {
    const settle = async (promise: Promise<void>) => {
      let settled = false;
      void promise.then(() => (settled = true));
      // (Resolved promises settle within a few microtasks.)
      for (let i = 0; i < 10; i++) {
        await Promise.resolve();
      }
      return settled;
    };
    for (const answer of [
      { status: 200, body: [sessionModel('s1')] },
      { status: 500, body: { message: 'boom' } }
    ]) {
      const { settings } = makeSettings([answer]);
      const sessions = makeSessions(settings);
      expect(await settle(sessions.ready)).toBe(false);
      await sessions.refreshRunning();
      expect(await settle(sessions.ready)).toBe(true);
      sessions.dispose();
    }
  });

  it('keeps the last list when the server cannot be reached', async () => {
    const { settings } = makeSettings([
      { status: 200, body: [sessionModel('s1')] },
      { status: 500, body: { message: 'boom' } }
    ]);
    const sessions = makeSessions(settings);
    await sessions.refreshRunning();
    await expect(sessions.refreshRunning()).resolves.toBeUndefined();
    expect(sessions.running().map(s => s.id)).toEqual(['s1']);
    sessions.dispose();
  });

  it('leaves a hidden session out until the server no longer lists it', async () => {
    const { settings } = makeSettings([
      { status: 200, body: [sessionModel('s1'), sessionModel('s2')] },
      { status: 200, body: [sessionModel('s1'), sessionModel('s2')] },
      { status: 200, body: [sessionModel('s2')] },
      { status: 200, body: [sessionModel('s1'), sessionModel('s2')] }
    ]);
    const sessions = makeSessions(settings);
    await sessions.refreshRunning();
    sessions.hide('s1');
    expect(sessions.running().map(s => s.id)).toEqual(['s2']);
    // Still listed (its DELETE on its way): still left out, but looked up.
    await expect(sessions.findById('s1')).resolves.toEqual(sessionModel('s1'));
    expect(sessions.running().map(s => s.id)).toEqual(['s2']);
    await sessions.refreshRunning();
    // A session of that id listed again later is a session again.
    await sessions.refreshRunning();
    expect(sessions.running().map(s => s.id)).toEqual(['s1', 's2']);
    sessions.dispose();
  });

  it('starts, connects to, resets and shuts down sessions through the REST routes', async () => {
    const { settings, requests } = makeSettings([
      { status: 201, body: sessionModel('s1') },
      { status: 200, body: sessionModel('s1') },
      { status: 204 },
      { status: 403, body: { message: 'Forbidden' } },
      { status: 500, body: { message: 'The engine failed.' } }
    ]);
    const sessions = makeSessions(settings);
    const session = await sessions.startNew('pg-1', { rows: 24, cols: 80 });
    const connection = sessions.connectTo(session);
    expect(connection.serverSettings).toBe(settings);
    expect(FakeWebSocket.last.url).toMatch(/\/websocket\/s1$/);
    await sessions.reset('s1');
    await sessions.shutdown('s1');
    // Already gone (403, as for an unknown session): shut down.
    await expect(sessions.shutdown('s1')).resolves.toBeUndefined();
    await expect(sessions.shutdown('s1')).rejects.toThrow('engine failed');
    expect(requests.map(r => `${r.method} ${pathOf(r)}`)).toEqual([
      'POST /user/alice/tool-terminal/api/sessions',
      'POST /user/alice/tool-terminal/api/sessions/s1/reset',
      'DELETE /user/alice/tool-terminal/api/sessions/s1',
      'DELETE /user/alice/tool-terminal/api/sessions/s1',
      'DELETE /user/alice/tool-terminal/api/sessions/s1'
    ]);
    expect(JSON.parse(requests[0].body)).toEqual({
      instance: 'pg-1',
      rows: 24,
      cols: 80
    });
    connection.dispose();
    sessions.dispose();
  });
});
