// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import { PageConfig, URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import type { ISettingRegistry } from '@jupyterlab/settingregistry';
import type { ITerminal } from '@jupyterlab/terminal';

import { TERMINAL_SETTINGS_PLUGIN } from './tokens';

/**
 * The page-config option carrying `ToolTerminalApp.service_url`: the URL of
 * the JupyterHub tool-terminal service that serves this user's tool terminals.
 */
export const SERVICE_URL_OPTION = 'toolTerminalServiceUrl';

/**
 * Settings that point at a JupyterHub tool-terminal service (not at the
 * server that served the page).
 */
const serviceSettings = new WeakSet<ServerConnection.ISettings>();

/**
 * The server settings of the tool terminals.
 *
 * Without a `service_url` these are the page's own server settings. With
 * one, REST calls and WebSockets go to the service, on the same origin
 * behind the Hub's proxy: REST calls carry the page's JupyterHub token in
 * the `Authorization` header (the Hub grants it access to the service), and
 * WebSockets carry the service's own login cookie (see
 * {@link isServiceSettings}); a token never goes into a URL.
 *
 * @param base - The page's own server settings.
 * @param serviceUrl - The service URL (default: from the page config).
 * @returns The settings the tool terminals use.
 */
export function toolTerminalSettings(
  base: ServerConnection.ISettings,
  serviceUrl: string = PageConfig.getOption(SERVICE_URL_OPTION)
): ServerConnection.ISettings {
  if (!serviceUrl) {
    return base;
  }
  const baseUrl = URLExt.normalize(
    serviceUrl.endsWith('/') ? serviceUrl : `${serviceUrl}/`
  );
  const settings = ServerConnection.makeSettings({
    ...base,
    baseUrl,
    wsUrl: baseUrl.replace(/^http/, 'ws'),
    appendToken: false
  });
  serviceSettings.add(settings);
  return settings;
}

/**
 * Whether settings point at a JupyterHub tool-terminal service, whose
 * WebSockets need its login cookie first.
 *
 * @param settings - Server settings.
 * @returns `true` for settings made by {@link toolTerminalSettings} from a
 *   service URL.
 */
export function isServiceSettings(
  settings: ServerConnection.ISettings
): boolean {
  return serviceSettings.has(settings);
}

/**
 * Follow the user's JupyterLab terminal settings (font, theme, scrollback,
 * screen reader mode...) in the tool terminals, now and when they change.
 *
 * @param settingRegistry - The setting registry.
 * @param options - The options new terminals get: every setting is set in
 *   it, in place.
 * @param changed - Called with each setting, to apply it to the open
 *   terminals.
 */
export function followTerminalSettings(
  settingRegistry: ISettingRegistry,
  options: Partial<ITerminal.IOptions>,
  changed: <K extends keyof ITerminal.IOptions>(
    key: K,
    value: ITerminal.IOptions[K]
  ) => void
): void {
  const apply = (settings: ISettingRegistry.ISettings): void => {
    const composite = settings.composite as Partial<ITerminal.IOptions>;
    for (const key of Object.keys(composite) as Array<
      keyof ITerminal.IOptions
    >) {
      const value = composite[key];
      if (value === undefined) {
        continue;
      }
      (options as Record<string, unknown>)[key] = value;
      changed(key, value);
    }
  };
  settingRegistry
    .load(TERMINAL_SETTINGS_PLUGIN)
    .then(settings => {
      apply(settings);
      settings.changed.connect(apply);
    })
    .catch(() => {
      // JupyterLab's terminal extension is disabled: use its defaults.
    });
}
