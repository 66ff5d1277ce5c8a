{{/*
Named templates. Most take a dict {"values": <the xrgw values>, "root": <top context>}
so that an application chart that has xrgw as a dependency can call them with its own
context and `.Values.xrgw` (see "Sidecar mode" in the chart README):

  containers:
    {{- include "xrgw.sidecar.container" (dict "values" .Values.xrgw "root" $) | nindent 4 }}
  volumes:
    {{- include "xrgw.sidecar.volumes" (dict "values" .Values.xrgw "root" $) | nindent 4 }}
*/}}

{{- define "xrgw.nameFor" -}}
{{- default "xrgw" .values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "xrgw.fullnameFor" -}}
{{- $v := .values -}}
{{- if $v.fullnameOverride -}}
{{- $v.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "xrgw.nameFor" . -}}
{{- if contains $name .root.Release.Name -}}
{{- .root.Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .root.Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Shorthands for this chart's own templates. */}}
{{- define "xrgw.fullname" -}}
{{- include "xrgw.fullnameFor" (dict "values" .Values "root" .) -}}
{{- end -}}

{{- define "xrgw.configMapName" -}}
{{- if .values.existingConfigMap -}}
{{- .values.existingConfigMap -}}
{{- else -}}
{{- printf "%s-config" (include "xrgw.fullnameFor" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "xrgw.selectorLabelsFor" -}}
app.kubernetes.io/name: {{ include "xrgw.nameFor" . }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{/* Labels every object of the release carries: commonLabels, then the chart's own. */}}
{{- define "xrgw.releaseLabelsFor" -}}
{{- with .values.commonLabels }}
{{ toYaml . }}
{{- end }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/version: {{ .values.image.tag | quote }}
app.kubernetes.io/part-of: xrgw
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{- define "xrgw.labelsFor" -}}
{{ include "xrgw.releaseLabelsFor" . | trim }}
app.kubernetes.io/name: {{ include "xrgw.nameFor" . }}
app.kubernetes.io/component: {{ .values.mode }}
{{- end -}}

{{/* The `helm test` pod: the release's labels but not the selector's name, so that the
Service, the PodDisruptionBudget and the NetworkPolicy's pod selector never pick it. */}}
{{- define "xrgw.testLabels" -}}
{{ include "xrgw.releaseLabelsFor" (dict "values" .Values "root" .) | trim }}
app.kubernetes.io/component: helm-test
{{- end -}}

{{- define "xrgw.labels" -}}
{{ include "xrgw.labelsFor" (dict "values" .Values "root" .) }}
{{- end -}}

{{- define "xrgw.selectorLabels" -}}
{{ include "xrgw.selectorLabelsFor" (dict "values" .Values "root" .) }}
{{- end -}}

{{- define "xrgw.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "xrgw.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "xrgw.image" -}}
{{- $i := .values.image -}}
{{- if $i.digest -}}
{{- printf "%s@%s" $i.repository $i.digest -}}
{{- else -}}
{{- printf "%s:%s" $i.repository $i.tag -}}
{{- end -}}
{{- end -}}

{{/* host:port of the admin server: loopback in sidecar mode unless set. */}}
{{- define "xrgw.adminListen" -}}
{{- $v := .values -}}
{{- if $v.admin.listen -}}
{{- $v.admin.listen -}}
{{- else if eq $v.mode "sidecar" -}}
{{- printf "127.0.0.1:%v" $v.admin.port -}}
{{- else -}}
{{- printf "0.0.0.0:%v" $v.admin.port -}}
{{- end -}}
{{- end -}}

{{/* "true" when the admin server only listens on loopback: the kubelet's probes then go
to the probes-only listener on admin.healthPort (config admin.health_listen). */}}
{{- define "xrgw.adminLoopback" -}}
{{- $listen := include "xrgw.adminListen" . -}}
{{- if or (hasPrefix "127." $listen) (hasPrefix "localhost:" $listen) (hasPrefix "[::1]:" $listen) -}}
true
{{- end -}}
{{- end -}}

{{/* What /readyz requires (config admin.readiness): admin.readiness, else all for a
bridge and none for a sidecar, whose readiness is its application pod's and must not
follow a remote broker. */}}
{{- define "xrgw.readiness" -}}
{{- $v := .values -}}
{{- if $v.admin.readiness -}}
{{- $v.admin.readiness -}}
{{- else if eq $v.mode "sidecar" -}}
none
{{- else -}}
all
{{- end -}}
{{- end -}}

{{/* The gateway config file (/etc/xrgw/config.yaml). */}}
{{- define "xrgw.configYaml" -}}
{{- $v := .values -}}
{{- $cfg := deepCopy (omit $v.config "definitions" "admin") -}}
{{- $sources := list -}}
{{- range $v.definitions.documents -}}
{{- if eq .name "config.yaml" -}}
{{- fail "definitions.documents: a document cannot be named config.yaml (that is the gateway config)" -}}
{{- end -}}
{{- $sources = append $sources .name -}}
{{- end -}}
{{- range $v.definitions.registries -}}
{{- $sources = append $sources . -}}
{{- end -}}
{{- if not $sources -}}
{{- fail "definitions: give at least one document (definitions.documents) or registry (definitions.registries)" -}}
{{- end -}}
{{- $_ := set $cfg "definitions" $sources -}}
{{- $admin := dict "listen" (include "xrgw.adminListen" .) "readiness" (include "xrgw.readiness" .) -}}
{{- if include "xrgw.adminLoopback" . -}}
{{- $_ := set $admin "health_listen" (printf "0.0.0.0:%v" $v.admin.healthPort) -}}
{{- end -}}
{{- $_ := set $admin "pages" ($v.admin.pages | default "auto") -}}
{{- $_ := set $admin "pages_listen" (printf "127.0.0.1:%v" ($v.admin.pagesPort | default 9466)) -}}
{{- if $v.admin.tokenFile -}}
{{- $_ := set $admin "token_file" $v.admin.tokenFile -}}
{{- end -}}
{{- $_ := set $cfg "admin" $admin -}}
# Rendered by the xrgw Helm chart; reference: docs/configuration.md
{{ toYaml $cfg }}
{{- end -}}

{{/* ConfigMap data: config.yaml and every document. */}}
{{- define "xrgw.configData" -}}
config.yaml: |
{{ include "xrgw.configYaml" . | indent 2 }}
{{- range .values.definitions.documents }}
{{ .name }}: |
{{- if kindIs "string" .content }}
{{ .content | indent 2 }}
{{- else }}
{{ toPrettyJson .content | indent 2 }}
{{- end }}
{{- end }}
{{- end -}}

{{/* An HTTP probe: on the admin port, or on the probes-only port when the admin server
is loopback-only (the kubelet connects to the pod address, never to its loopback). */}}
{{- define "xrgw.probe" -}}
httpGet:
  path: {{ .path }}
  port: {{ if include "xrgw.adminLoopback" .ctx }}health{{ else }}admin{{ end }}
periodSeconds: {{ .settings.periodSeconds }}
timeoutSeconds: {{ .settings.timeoutSeconds }}
failureThreshold: {{ .settings.failureThreshold }}
{{- end -}}

{{/* The xrgw container (both modes). Context: {"values", "root"}. */}}
{{- define "xrgw.container" -}}
{{- $v := .values -}}
- name: xrgw
  image: {{ include "xrgw.image" . | quote }}
  imagePullPolicy: {{ $v.image.pullPolicy }}
  args: ["-c", "/etc/xrgw/config.yaml"{{ range $v.extraArgs }}, {{ . | quote }}{{ end }}]
  {{- if and (eq $v.mode "sidecar") $v.sidecar.native }}
  restartPolicy: Always
  {{- end }}
  ports:
    - name: admin
      containerPort: {{ $v.admin.port }}
      protocol: TCP
    {{- if include "xrgw.adminLoopback" . }}
    - name: health
      containerPort: {{ $v.admin.healthPort }}
      protocol: TCP
    {{- end }}
    {{- if $v.httpIngress.enabled }}
    - name: http
      containerPort: {{ $v.httpIngress.port }}
      protocol: TCP
    {{- end }}
  env:
    - name: XRGW_POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
    - name: XRGW_CLIENT_ID
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
    {{- with concat ($v.env | default list) ($v.extraEnv | default list) }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with $v.envFrom }}
  envFrom:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  startupProbe:
    {{- include "xrgw.probe" (dict "ctx" . "path" "/healthz" "settings" $v.probes.startup) | trim | nindent 4 }}
  livenessProbe:
    {{- include "xrgw.probe" (dict "ctx" . "path" "/healthz" "settings" $v.probes.liveness) | trim | nindent 4 }}
  readinessProbe:
    {{- include "xrgw.probe" (dict "ctx" . "path" ($v.probes.readiness.path | default "/readyz") "settings" $v.probes.readiness) | trim | nindent 4 }}
  resources:
    {{- toYaml $v.resources | nindent 4 }}
  securityContext:
    {{- toYaml $v.securityContext | nindent 4 }}
  volumeMounts:
    - name: xrgw-config
      mountPath: /etc/xrgw
      readOnly: true
    - name: xrgw-tmp
      mountPath: /tmp
    {{- range $v.secretMounts }}
    - name: {{ printf "xrgw-secret-%s" .name | trunc 63 | trimSuffix "-" }}
      mountPath: {{ default (printf "/run/secrets/xrgw/%s" .name) .mountPath }}
      readOnly: true
    {{- end }}
    {{- with $v.extraVolumeMounts }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end -}}

{{/* `xrgw validate --connect` in the gateway's image, with its config, secrets and
environment: DNS, TCP, TLS, login and topics of every endpoint before traffic (the init
container and the `helm test` pod). Context: {"values", "root", "name"}. */}}
{{- define "xrgw.preflight.container" -}}
{{- $v := .values -}}
- name: {{ .name }}
  image: {{ include "xrgw.image" . | quote }}
  imagePullPolicy: {{ $v.image.pullPolicy }}
  command: ["xrgw", "validate", "--connect", "-c", "/etc/xrgw/config.yaml", "--timeout", {{ $v.preflight.timeout | quote }}{{ if $v.preflight.strict }}, "--strict"{{ end }}]
  env:
    - name: XRGW_POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
    - name: XRGW_CLIENT_ID
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
    {{- with concat ($v.env | default list) ($v.extraEnv | default list) }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with $v.envFrom }}
  envFrom:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  resources:
    {{- toYaml $v.resources | nindent 4 }}
  securityContext:
    {{- toYaml $v.securityContext | nindent 4 }}
  volumeMounts:
    - name: xrgw-config
      mountPath: /etc/xrgw
      readOnly: true
    - name: xrgw-tmp
      mountPath: /tmp
    {{- range $v.secretMounts }}
    - name: {{ printf "xrgw-secret-%s" .name | trunc 63 | trimSuffix "-" }}
      mountPath: {{ default (printf "/run/secrets/xrgw/%s" .name) .mountPath }}
      readOnly: true
    {{- end }}
    {{- with $v.extraVolumeMounts }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end -}}

{{/* The pod volumes the container needs. Context: {"values", "root"}. */}}
{{- define "xrgw.volumes" -}}
{{- $v := .values -}}
- name: xrgw-config
  configMap:
    name: {{ include "xrgw.configMapName" . }}
- name: xrgw-tmp
  emptyDir:
    sizeLimit: {{ $v.tmpSizeLimit }}
{{- range $v.secretMounts }}
- name: {{ printf "xrgw-secret-%s" .name | trunc 63 | trimSuffix "-" }}
  secret:
    secretName: {{ .secretName }}
    defaultMode: 0440
    {{- with .items }}
    items:
      {{- toYaml . | nindent 6 }}
    {{- end }}
{{- end }}
{{- with $v.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Sidecar mode: the public entry points for an application's pod spec. */}}
{{- define "xrgw.sidecar.container" -}}
{{- $v := mergeOverwrite (deepCopy .values) (dict "mode" "sidecar") -}}
{{- include "xrgw.container" (dict "values" $v "root" .root) -}}
{{- end -}}

{{- define "xrgw.sidecar.volumes" -}}
{{- include "xrgw.volumes" . -}}
{{- end -}}
