// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import { createSession, getSession } from '../api';
import { webSocketUrl } from '../connection';
import { isServiceSettings, toolTerminalSettings } from '../settings';
import { makeSettings, pathOf, sessionModel } from './helpers';

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
    expect(settings.token).toBe('hub-token');
    expect(webSocketUrl('abc', settings)).toBe(
      'ws://localhost/services/tool-terminal/tool-terminal/websocket/abc'
    );
  });

  it('logs in once for the WebSockets before sessions, with the token header', async () => {
    const { settings: base, requests } = makeSettings(
      [
        { status: 204 },
        { status: 201, body: sessionModel('s1') },
        { status: 200, body: sessionModel('s1') }
      ],
      { token: 'hub-token' }
    );
    const settings = toolTerminalSettings(base, '/services/tool-terminal/');
    await createSession('pg-1', settings);
    await getSession('s1', settings);
    expect(requests.map(r => `${r.method} ${pathOf(r)}`)).toEqual([
      'POST /services/tool-terminal/tool-terminal/api/hub-login',
      'POST /services/tool-terminal/tool-terminal/api/sessions',
      'GET /services/tool-terminal/tool-terminal/api/sessions/s1'
    ]);
    expect(requests[0].headers.get('Authorization')).toBe('token hub-token');
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
