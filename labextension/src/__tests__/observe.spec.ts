// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import { listObserved, ObserverConnection, shareReadOnly } from '../observe';
import { FakeWebSocket, makeSettings, pathOf, sessionModel } from './helpers';

describe('observe', () => {
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
});
