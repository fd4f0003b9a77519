namespace geogate::routing {}
