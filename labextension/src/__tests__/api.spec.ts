// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import { ServerConnection } from '@jupyterlab/services';

import {
  createSession,
  deleteSession,
  listInstances,
  requestAPI,
  resetSession
} from '../api';
import { makeSettings, pathOf, sessionModel } from './helpers';

describe('api', () => {
  afterEach(() => {
    document.cookie = '_xsrf=; expires=Thu, 01 Jan 1970 00:00:00 GMT';
  });

  describe('listInstances', () => {
    it('gets the instances under the base URL', async () => {
      const instance = {
        id: 'pg-1',
        tool: 'postgres',
        display_name: 'PostgreSQL',
        status: 'running',
        has_startup_command: true,
        icon: null
      };
      const { settings, requests } = makeSettings([
        { status: 200, body: [instance] }
      ]);
      await expect(listInstances(settings)).resolves.toEqual([instance]);
      expect(requests).toHaveLength(1);
      expect(requests[0].method).toBe('GET');
      expect(pathOf(requests[0])).toBe(
        '/user/alice/tool-terminal/api/instances'
      );
    });

    it('drops malformed items', async () => {
      const { settings } = makeSettings([
        {
          status: 200,
          body: [
            null,
            'x',
            { id: 'a' },
            { id: 'b', tool: 't', display_name: 'T', status: 'running' }
          ]
        }
      ]);
      const list = await listInstances(settings);
      expect(list.map(i => i.id)).toEqual(['b']);
    });

    it('rejects an answer that is not a list', async () => {
      const { settings } = makeSettings([{ status: 200, body: { id: 'x' } }]);
      await expect(listInstances(settings)).rejects.toThrow(
        'Unexpected answer'
      );
    });
  });

  describe('createSession', () => {
    it('posts the instance id and returns the session', async () => {
      const model = sessionModel('s1');
      const { settings, requests } = makeSettings([
        { status: 201, body: model }
      ]);
      await expect(createSession('pg-1', settings)).resolves.toEqual(model);
      expect(requests[0].method).toBe('POST');
      expect(pathOf(requests[0])).toBe(
        '/user/alice/tool-terminal/api/sessions'
      );
      expect(JSON.parse(requests[0].body)).toEqual({ instance: 'pg-1' });
    });

    it('sends the XSRF cookie as a header', async () => {
      document.cookie = '_xsrf=xsrf-value';
      const { settings, requests } = makeSettings([
        { status: 201, body: sessionModel('s1') }
      ]);
      await createSession('pg-1', settings);
      expect(requests[0].headers.get('X-XSRFToken')).toBe('xsrf-value');
      expect(requests[0].headers.get('Authorization')).toBeNull();
    });

    it('sends the token when the settings have one', async () => {
      const { settings, requests } = makeSettings(
        [{ status: 201, body: sessionModel('s1') }],
        { token: 'secret' }
      );
      await createSession('pg-1', settings);
      expect(requests[0].headers.get('Authorization')).toBe('token secret');
    });

    it.each([
      [403, 'Forbidden'],
      [409, 'The tool instance is not running'],
      [429, 'Too many sessions']
    ])('rejects a %d with the server message', async (status, message) => {
      const { settings } = makeSettings([{ status, body: { message } }]);
      const error = await createSession('pg-1', settings).catch(e => e);
      expect(error).toBeInstanceOf(ServerConnection.ResponseError);
      expect(error.response.status).toBe(status);
      expect(error.message).toBe(message);
    });
  });

  describe('session routes', () => {
    it('resets a session', async () => {
      const { settings, requests } = makeSettings([
        { status: 200, body: sessionModel('s1') }
      ]);
      await resetSession('s1', settings);
      expect(requests[0].method).toBe('POST');
      expect(pathOf(requests[0])).toBe(
        '/user/alice/tool-terminal/api/sessions/s1/reset'
      );
    });

    it('deletes a session (204, empty body)', async () => {
      const { settings, requests } = makeSettings([{ status: 204 }]);
      await expect(deleteSession('s1', settings)).resolves.toBeUndefined();
      expect(requests[0].method).toBe('DELETE');
      expect(pathOf(requests[0])).toBe(
        '/user/alice/tool-terminal/api/sessions/s1'
      );
    });

    it('keeps a non-JSON error body as the message', async () => {
      const { settings } = makeSettings([], {
        fetch: async () => new Response('plain failure', { status: 500 })
      });
      await expect(requestAPI('instances', settings)).rejects.toThrow(
        'plain failure'
      );
    });

    it('reports an unreachable server as a network error', async () => {
      const { settings } = makeSettings([], {
        fetch: async () => {
          throw new TypeError('Failed to fetch');
        }
      });
      await expect(requestAPI('instances', settings)).rejects.toBeInstanceOf(
        ServerConnection.NetworkError
      );
    });
  });
});
