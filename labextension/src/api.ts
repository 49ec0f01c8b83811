// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { ensureServiceLogin } from './settings';
import type { IObservedSession, ISessionModel, IToolInstance } from './tokens';
import { URL_NAMESPACE } from './tokens';

/**
 * Call a REST route of the server extension.
 *
 * @param endPoint - The path below `<base_url>/tool-terminal/api/`.
 * @param serverSettings - The server settings (base URL, token, XSRF).
 * @param init - The request options.
 * @returns The parsed JSON body, or `null` for an empty body.
 * @throws {ServerConnection.ResponseError} on a non-2xx answer, with the
 *   server's message when it sent one.
 * @throws {ServerConnection.NetworkError} when the server cannot be reached.
 */
export async function requestAPI<T>(
  endPoint: string,
  serverSettings: ServerConnection.ISettings,
  init: RequestInit = {}
): Promise<T> {
  const url = URLExt.join(
    serverSettings.baseUrl,
    URL_NAMESPACE,
    'api',
    endPoint
  );
  const response = await ServerConnection.makeRequest(
    url,
    init,
    serverSettings
  );
  const text = await response.text();
  let data: unknown = null;
  if (text.length > 0) {
    try {
      data = JSON.parse(text);
    } catch {
      data = text;
    }
  }
  if (!response.ok) {
    throw new ServerConnection.ResponseError(response, Private.message(data));
  }
  return data as T;
}

/**
 * List the tool instances of the current user.
 *
 * @param serverSettings - The server settings.
 * @returns The instances, in the server's order.
 */
export async function listInstances(
  serverSettings: ServerConnection.ISettings
): Promise<IToolInstance[]> {
  const data = await requestAPI<unknown>('instances', serverSettings);
  if (!Array.isArray(data)) {
    throw new Error('Unexpected answer listing tool instances');
  }
  return data.filter(Private.isInstance);
}

/**
 * Make sure the terminal WebSockets of a JupyterHub tool-terminal service
 * will authenticate: the browser logs in at the service through the
 * service's own OAuth flow, which sets the service's HttpOnly login cookie
 * that the browser then sends with the WebSockets. Asked once per page and
 * service; a failure is asked again next time. Nothing to do for the page's
 * own server.
 *
 * @param serverSettings - The tool terminals' server settings.
 */
export async function ensureWebSocketLogin(
  serverSettings: ServerConnection.ISettings
): Promise<void> {
  await ensureServiceLogin(serverSettings);
}

/**
 * Start a new terminal session in a tool instance.
 *
 * @param instance - The tool instance id.
 * @param serverSettings - The server settings.
 * @param size - The terminal size the shell starts at, when the panel knows
 *   it (what a startup command prints is then laid out for the panel).
 * @returns The new session.
 */
export async function createSession(
  instance: string,
  serverSettings: ServerConnection.ISettings,
  size?: ITerminalSize | null
): Promise<ISessionModel> {
  await ensureWebSocketLogin(serverSettings);
  return requestAPI<ISessionModel>('sessions', serverSettings, {
    method: 'POST',
    body: JSON.stringify(size ? { instance, ...size } : { instance })
  });
}

/**
 * A terminal size, in character cells.
 */
export interface ITerminalSize {
  rows: number;
  cols: number;
}

/**
 * List the sessions of the current user.
 *
 * Looking a session up in the list answers 200 whether it is still there or
 * not: a page restoring panels of ended sessions logs no 403.
 *
 * @param serverSettings - The server settings.
 * @returns The sessions, in the server's order.
 */
export async function listSessions(
  serverSettings: ServerConnection.ISettings
): Promise<ISessionModel[]> {
  const data = await requestAPI<unknown>('sessions', serverSettings);
  if (!Array.isArray(data)) {
    throw new Error('Unexpected answer listing tool terminal sessions');
  }
  return data.filter(Private.isSession);
}

/**
 * Reset a session: its shell is killed and a new one starts, with the
 * startup command again; attached clients stay attached.
 *
 * @param id - The session id.
 * @param serverSettings - The server settings.
 */
export async function resetSession(
  id: string,
  serverSettings: ServerConnection.ISettings
): Promise<void> {
  await requestAPI<unknown>(
    `sessions/${encodeURIComponent(id)}/reset`,
    serverSettings,
    { method: 'POST' }
  );
}

/**
 * Delete a session: its processes are killed in the container.
 *
 * @param id - The session id.
 * @param serverSettings - The server settings.
 */
export async function deleteSession(
  id: string,
  serverSettings: ServerConnection.ISettings
): Promise<void> {
  await requestAPI<unknown>(
    `sessions/${encodeURIComponent(id)}`,
    serverSettings,
    { method: 'DELETE' }
  );
}

/**
 * Share session `sessionId` read-only with `user`; resolves to the users it
 * is now shared with.
 */
export function shareReadOnly(
  sessionId: string,
  user: string,
  serverSettings: ServerConnection.ISettings
): Promise<string[]> {
  return requestAPI<string[]>(
    `sessions/${encodeURIComponent(sessionId)}/observers`,
    serverSettings,
    { method: 'POST', body: JSON.stringify({ user }) }
  );
}

/**
 * The users session `sessionId` is shared with, read-only.
 */
export async function listObservers(
  sessionId: string,
  serverSettings: ServerConnection.ISettings
): Promise<string[]> {
  const data = await requestAPI<unknown>(
    `sessions/${encodeURIComponent(sessionId)}/observers`,
    serverSettings
  );
  if (!Array.isArray(data)) {
    throw new Error('The server did not answer with a list of users.');
  }
  return data.filter((item): item is string => typeof item === 'string');
}

/**
 * Stop sharing session `sessionId` with `user`: the server closes their
 * views at once.
 */
export async function stopSharing(
  sessionId: string,
  user: string,
  serverSettings: ServerConnection.ISettings
): Promise<void> {
  await requestAPI<null>(
    `sessions/${encodeURIComponent(sessionId)}/observers/${encodeURIComponent(user)}`,
    serverSettings,
    { method: 'DELETE' }
  );
}

/**
 * The sessions other users shared with the current user. Through a
 * JupyterHub service, the page logs in for the WebSockets first (as for its
 * own sessions): an observer may have opened no tool terminal of their own.
 */
export async function listObserved(
  serverSettings: ServerConnection.ISettings
): Promise<IObservedSession[]> {
  await ensureWebSocketLogin(serverSettings);
  const data = await requestAPI<unknown>(
    'sessions?role=observer',
    serverSettings
  );
  if (!Array.isArray(data)) {
    throw new Error('The server did not answer with a list of sessions.');
  }
  return data.filter(
    (item): item is IObservedSession =>
      typeof item?.id === 'string' &&
      typeof item?.owner === 'string' &&
      typeof item?.instance === 'string'
  );
}

/**
 * Module internals.
 */
namespace Private {
  /**
   * Extract a human-readable message from an error body.
   */
  export function message(data: unknown): string | undefined {
    if (typeof data === 'string' && data.length > 0) {
      return data;
    }
    if (data !== null && typeof data === 'object') {
      const body = data as { message?: unknown; reason?: unknown };
      if (typeof body.message === 'string' && body.message.length > 0) {
        return body.message;
      }
      if (typeof body.reason === 'string' && body.reason.length > 0) {
        return body.reason;
      }
    }
    return undefined;
  }

  /**
   * Whether an answer has the fields of a session model.
   */
  export function isSession(item: unknown): item is ISessionModel {
    if (item === null || typeof item !== 'object' || Array.isArray(item)) {
      return false;
    }
    const value = item as Record<string, unknown>;
    return (
      typeof value.id === 'string' &&
      value.id !== '' &&
      typeof value.instance === 'string' &&
      typeof value.tool === 'string'
    );
  }

  /**
   * Whether a listed item has the fields of a tool instance.
   */
  export function isInstance(item: unknown): item is IToolInstance {
    if (item === null || typeof item !== 'object') {
      return false;
    }
    const value = item as Record<string, unknown>;
    return (
      typeof value.id === 'string' &&
      typeof value.tool === 'string' &&
      typeof value.display_name === 'string' &&
      typeof value.status === 'string'
    );
  }
}
