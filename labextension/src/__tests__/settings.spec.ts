// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import { createSession, listSessions } from '../api';
import { webSocketUrl } from '../connection';
import { isServiceSettings, toolTerminalSettings } from '../settings';
import {
  answerLoginFrame,
  makeSettings,
  pathOf,
  sessionModel,
  until
} from './helpers';

describe('toolTerminalSettings', () => {
  it('keeps the page server settings without a service URL', () => {
    const { settings } = makeSettings();
    expect(toolTerminalSettings(settings, '')).toBe(settings);
    expect(isServiceSettings(settings)).toBe(false);
  });

  it('points REST and WebSockets at the service, token in no URL', () => {
    const { settings: base } = makeSettings([], {
      token: 'hub-token',
      appendToken: true
    });
    const settings = toolTerminalSettings(base, '/services/tool-terminal');
    expect(isServiceSettings(settings)).toBe(true);
    expect(settings.baseUrl).toBe('http://localhost/services/tool-terminal/');
    expect(settings.wsUrl).toBe('ws://localhost/services/tool-terminal/');
    // The page's token belongs to the user's server: never sent to the service.
    expect(settings.token).toBe('');
    expect(webSocketUrl('abc', settings)).toBe(
      'ws://localhost/services/tool-terminal/tool-terminal/websocket/abc'
    );
  });

  it('logs in once through the service, then sends its XSRF token, no page token', async () => {
    const { settings: base, requests } = makeSettings(
      [
        { status: 201, body: sessionModel('s1') },
        { status: 200, body: [sessionModel('s1')] }
      ],
      { token: 'hub-token' }
    );
    const settings = toolTerminalSettings(base, '/services/tool-terminal/');
    const created = createSession('pg-1', settings);
    const frame = await answerLoginFrame({
      user: 'alice',
      xsrf: 'service-xsrf'
    });
    expect(new URL(frame).pathname).toBe(
      '/services/tool-terminal/tool-terminal/login'
    );
    await created;
    await listSessions(settings);
    expect(requests.map(r => `${r.method} ${pathOf(r)}`)).toEqual([
      'POST /services/tool-terminal/tool-terminal/api/sessions',
      'GET /services/tool-terminal/tool-terminal/api/sessions'
    ]);
    for (const request of requests) {
      expect(request.headers.get('Authorization')).toBeNull();
      expect(request.headers.get('X-XSRFToken')).toBe('service-xsrf');
    }
    // The frame is gone once it answered.
    expect(document.querySelector('iframe')).toBeNull();
  });

  it("ignores messages that are not the login frame's", async () => {
    const { settings: base } = makeSettings([{ status: 200, body: [] }]);
    const settings = toolTerminalSettings(base, '/services/forged/');
    let listed = false;
    const listing = listSessions(settings).then(() => (listed = true));
    await until(() => document.querySelector('iframe') !== null);
    // Another window of the same origin, and the right frame from elsewhere.
    window.dispatchEvent(
      new MessageEvent('message', {
        origin: window.location.origin,
        source: window,
        data: { type: 'jupyter-tool-terminal:logged-in', user: 'x', xsrf: 'x' }
      })
    );
    await new Promise(resolve => setTimeout(resolve, 10));
    expect(listed).toBe(false);
    await answerLoginFrame();
    await listing;
    expect(listed).toBe(true);
  });

  it('logs in again once when the service refuses its cookie', async () => {
    const { settings: base, requests } = makeSettings([
      { status: 403, body: { message: 'Forbidden' } },
      { status: 200, body: [] }
    ]);
    const settings = toolTerminalSettings(base, '/services/relogin/');
    const listing = listSessions(settings);
    await answerLoginFrame({ user: 'alice', xsrf: 'old' });
    await until(() => requests.length === 1);
    await answerLoginFrame({ user: 'alice', xsrf: 'new' });
    await listing;
    expect(requests.map(r => `${r.method} ${pathOf(r)}`)).toEqual([
      'GET /services/relogin/tool-terminal/api/sessions',
      'GET /services/relogin/tool-terminal/api/sessions'
    ]);
    expect(requests[1].headers.get('X-XSRFToken')).toBe('new');
  });

  it('does not log in at the page server', async () => {
    const { settings, requests } = makeSettings([
      { status: 201, body: sessionModel('s1') }
    ]);
    await createSession('pg-1', settings);
    expect(requests.map(r => pathOf(r))).toEqual([
      '/user/alice/tool-terminal/api/sessions'
    ]);
  });
});
